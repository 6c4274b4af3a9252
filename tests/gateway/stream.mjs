// ctest gateway_stream: streamed calls through llmq-gateway with the official
// openai npm package as the client, against openai-sim paced at one token
// per chunk (--stream-gap-ms), two workers, a --settle usage bucket.
//   - chat, responses and completions streams: the text equals what the same
//     server sends a direct client; the first chunk reaches the client while
//     the server is still sending (its access-log line, written when a request
//     ends, is not there yet);
//   - the usage chunk is there exactly when the client asked for it, and
//     chunks carry no "usage" member otherwise;
//   - every upstream stream request asked for usage, and the bucket holds the
//     usage the server reported;
//   - a client that aborts mid-stream: the upstream request is aborted (the
//     server logs the client gone), the job is settled (result line with
//     client_closed, nothing in flight), the bucket holds what was really
//     used, not the reservation;
//   - a 429 from the API before the stream: retried, the client's stream
//     still succeeds;
//   - a job with stream: true that no gateway waits for (llmq enqueue)
//     runs collected: streamed upstream, with usage, and its result line is
//     the assembled answer;
//   - /metrics counts the streams.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { clientFor, apiKey, runSteps } from './sdk.mjs';
import { bucket, chatText, collect, direct, inFlight, result, simLog, waitLog } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const TOKENS = 30; // --completion-tokens 30:30
const messages = [{ role: 'user', content: 'tell me something' }];

// The gateway's requests as the server saw them (the worker sends the job
// id as X-Client-Request-Id; a direct request has none).
const viaGateway = () => simLog().filter((l) => l.client_request_id !== '');

async function streamedChat(body, onChunk) {
    const before = simLog().length;
    let logAtFirst = -1;
    const s = await gw.chat.completions.create({ model: MODEL, messages, stream: true, ...body });
    const got = await collect(s, async (c, n) => {
        if (n === 1) logAtFirst = simLog().length;
        if (onChunk) await onChunk(c, n, s);
    });
    return { ...got, before, logAtFirst, stream: s };
}

let usageSum = 0; // what the server reported for the gateway's gpt-4o-mini calls

await runSteps([
    ['streamed chat: text as the server sends it, first chunk before the server finished', async () => {
        const d = await collect(await direct.chat.completions.create(
            { model: MODEL, messages, stream: true }));
        await sleep(100); // the direct request's log line is on disk
        const g = await streamedChat({});
        assert.equal(chatText(g.chunks), chatText(d.chunks));
        assert.equal(chatText(g.chunks), 'sim '.repeat(TOKENS));
        assert.equal(g.logAtFirst, g.before, 'the server had already finished at the first chunk');
        assert.ok(g.chunks.length >= TOKENS, `${g.chunks.length} chunks: one per token expected`);
        for (const c of g.chunks) assert.ok(!('usage' in c), 'a chunk carries usage, not asked');
    }],
    ['the usage chunk is there exactly when asked', async () => {
        const g = await streamedChat({ stream_options: { include_usage: true } });
        const withUsage = g.chunks.filter((c) => c.usage);
        assert.equal(withUsage.length, 1);
        assert.deepEqual(withUsage[0].choices, []);
        assert.equal(g.chunks[g.chunks.length - 1], withUsage[0], 'the usage chunk comes last');
        const line = (await waitLog(() => viaGateway().slice(-1)))[0];
        assert.equal(withUsage[0].usage.completion_tokens, TOKENS);
        assert.equal(withUsage[0].usage.total_tokens, line.prompt_tokens + line.completion_tokens);
        for (const c of g.chunks.slice(0, -1)) assert.equal(c.usage, null);
    }],
    ['streamed responses: the named events, the text, usage in response.completed', async () => {
        const input = 'hello there';
        const dir = await collect(await direct.responses.create({ model: MODEL, input, stream: true }));
        const g = await collect(await gw.responses.create({ model: MODEL, input, stream: true }));
        const types = g.chunks.map((e) => e.type);
        assert.deepEqual(types, dir.chunks.map((e) => e.type));
        assert.equal(types[0], 'response.created');
        assert.equal(types[types.length - 1], 'response.completed');
        const text = g.chunks.filter((e) => e.type === 'response.output_text.delta')
            .map((e) => e.delta).join('');
        assert.equal(text, 'sim '.repeat(TOKENS));
        const done = g.chunks[g.chunks.length - 1].response;
        assert.equal(done.usage.output_tokens, TOKENS);
        assert.ok(done.usage.input_tokens > 0);
    }],
    ['streamed completions', async () => {
        const g = await collect(await gw.completions.create(
            { model: MODEL, prompt: 'once upon', stream: true }));
        assert.equal(g.chunks.map((c) => c.choices?.[0]?.text ?? '').join(''), 'sim '.repeat(TOKENS));
    }],
    ['every upstream stream asked for usage; the bucket holds the usage reported', async () => {
        await sleep(300); // the last settles
        const lines = viaGateway().filter((l) => l.stream);
        assert.ok(lines.length >= 4, `${lines.length} streamed requests seen`);
        for (const l of lines) assert.equal(l.include_usage, true, JSON.stringify(l));
        usageSum = viaGateway().filter((l) => l.model === MODEL)
            .reduce((a, l) => a + l.prompt_tokens + l.completion_tokens, 0);
        assert.equal(bucket(MODEL).tokens_used, usageSum);
    }],
    ['client aborts mid-stream: upstream aborted, job settled, nothing left reserved', async () => {
        const before = bucket(MODEL).tokens_used;
        let got = 0;
        try {
            // the package ends the iteration quietly once its controller aborts
            got = (await streamedChat({}, async (c, n, s) => {
                if (n === 5) s.controller.abort();
            })).chunks.length;
        } catch (e) {
            if (e.name !== 'AbortError' && !/abort/i.test(String(e))) throw e;
        }
        assert.ok(got <= 6, `${got} chunks read after the abort`);
        const line = (await waitLog((log) => log.filter((l) => l.outcome === 'client_closed' &&
            l.client_request_id !== '')))[0];
        assert.equal(line.status, 499);
        assert.ok(line.completion_tokens < TOKENS, `the server sent ${line.completion_tokens}: not aborted`);
        const res = result(line.client_request_id);
        assert.equal(res.error.code, 'client_closed');
        assert.equal(res.response.status_code, 200);
        for (let i = 0; i < 100 && inFlight() > 0; i++) await sleep(100);
        assert.equal(inFlight(), 0, 'a job is still in flight');
        // settled on what was used: the prompt and the tokens that reached the
        // worker before it aborted (the server may have sent one more chunk,
        // in flight on the socket when the worker closed it)
        const used = bucket(MODEL).tokens_used - before;
        const really = line.prompt_tokens + line.completion_tokens;
        assert.ok(used <= really && used >= really - 2, `bucket charged ${used}, the server counted ${really}`);
    }],
    ['a 429 from the API before the stream is retried; the client stream succeeds', async () => {
        // the server allows one m429 request per 1.5 s window; llmq has no limit for it
        const runs = await Promise.all([0, 1].map(async () => chatText((await collect(
            await gw.chat.completions.create({ model: 'm429', messages, stream: true }))).chunks)));
        for (const t of runs) assert.equal(t, 'sim '.repeat(TOKENS));
        // the server writes a stream's log line once it has closed it, which
        // can be after the client read [DONE]: wait for both answers' lines
        const lines = await waitLog((log) => {
            const m = log.filter((l) => l.model === 'm429');
            return m.filter((l) => l.status === 200).length >= 2 ? m : null;
        });
        assert.ok(lines.some((l) => l.status === 429), 'the server never refused: no retry tested');
        assert.equal(lines.filter((l) => l.status === 200).length, 2);
    }],
    ['a stream: true job nobody relays runs collected: its result is the assembled answer', async () => {
        const id = 'collected-1';
        execFileSync(`${process.env.LLMQ_BIN_DIR}/llmq`, ['enqueue', '-'], {
            input: JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions',
                body: { model: MODEL, stream: true, messages } }) + '\n',
            stdio: ['pipe', 'ignore', 'inherit'] });
        const res = result(id);
        assert.equal(res.error, null, JSON.stringify(res));
        assert.equal(res.response.status_code, 200);
        assert.equal(res.response.body.choices[0].message.content, 'sim '.repeat(TOKENS));
        assert.equal(res.response.body.usage.completion_tokens, TOKENS);
        const line = (await waitLog((log) => log.filter((l) => l.client_request_id === id)))[0];
        assert.equal(line.stream, true);
        assert.equal(line.include_usage, true);
    }],
    ['/metrics counts the streams', async () => {
        const port = new URL(process.env.GW_URL).port;
        const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        const v = (re) => Number((m.match(re) || [])[1]);
        assert.ok(v(/llmq_gateway_streams_total\{end="completed"\} (\d+)/) >= 6, m);
        assert.ok(v(/llmq_gateway_streams_total\{end="aborted"\} (\d+)/) >= 1);
        assert.ok(v(/llmq_gateway_stream_ttft_seconds_count (\d+)/) >= 7);
        assert.equal(v(/llmq_gateway_streams_in_progress (-?\d+)/), 0);
        assert.ok(v(/llmq_gateway_stream_messages_total (\d+)/) > 0);
    }],
]);
