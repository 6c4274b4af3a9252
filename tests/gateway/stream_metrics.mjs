// ctest gateway_stream_metrics: what the gateway and the worker report about
// streamed calls, a client that leaves before the first message, and the
// gateway's readiness without its relay. One worker started here with
// --metrics-port (openai-sim: 800 ms before the first chunk, then 30
// chunks 20 ms apart), with the official openai npm package as the client.
//   - /metrics of both: streams in progress (1 while a stream runs, 0 after),
//     completed and aborted streams, the events relayed (every chunk the
//     client read, plus [DONE]), the relay messages, time to first token and
//     stream duration observed once per stream;
//   - a client that leaves before its stream's first message: the upstream
//     request is aborted at once (the server logs the client gone before its
//     first chunk was due), the job is settled client_closed with nothing in flight, and
//     the bucket holds what the server counted, not the reservation;
//   - each call's body is decoded once by the gateway, streamed or not
//     (llmq_gateway_call_bodies_decoded_total: one per call);
//   - /readyz is 503 naming the relay while Redis refuses the gateway's
//     subscription (an ACL without channels; the subscribed connections
//     dropped), a streamed call gets a 503, and /readyz is 200 once Redis
//     takes the subscription again (the connection retries by itself).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { apiKey, clientFor, runSteps } from './sdk.mjs';
import { bucket, chatText, collect, inFlight, result, simLog, waitLog } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const TOKENS = 30; // --completion-tokens 30:30
const LATENCY_MS = 800; // --latency-ms 800: the server's wait before its first chunk
const messages = [{ role: 'user', content: 'count for me' }];
const gwMetricsUrl = `http://127.0.0.1:${process.env.GW_PORT}/metrics`;

const freePort = () => new Promise((ok) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => ok(p));
    });
});

const metricsPort = await freePort();
const worker = spawn(`${process.env.LLMQ_BIN_DIR}/llmq-worker`,
    ['--base-url', process.env.SIM_URL, '--log-level', 'warn', '--consumer', 'w-metrics',
        '--metrics-port', String(metricsPort), '--log-level', process.env.WLOG || 'warn'],
    { env: { ...process.env, OPENAI_API_KEY: 'gw-test-not-a-real-key' }, stdio: ['ignore', 'ignore', 'inherit'] });
const workerMetricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;

async function scrape(url) {
    for (let i = 0; ; i++) {
        try {
            const text = await (await fetch(url)).text();
            // name{labels} value, or name value: the sum over the series matched
            return (name, labels = '') => {
                let sum = 0, seen = false;
                for (const line of text.split('\n')) {
                    if (!line.startsWith(name)) continue;
                    const m = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
                    if (!m || m[1] !== name || !(m[2] || '').includes(labels)) continue;
                    sum += Number(m[3]);
                    seen = true;
                }
                return seen ? sum : NaN;
            };
        } catch (e) {
            if (i > 100) throw e;
            await sleep(50); // the worker is starting
        }
    }
}
const both = async () => ({ g: await scrape(gwMetricsUrl), w: await scrape(workerMetricsUrl) });

function redis(...args) {
    return execFileSync('redis-cli', ['-p', process.env.REDIS_PORT, ...args], { encoding: 'utf8' });
}

async function readyz() {
    const r = await fetch(`http://127.0.0.1:${process.env.GW_PORT}/readyz`);
    return [r.status, await r.text()];
}

await runSteps([
    ['/metrics of the gateway and the worker: a completed stream', async () => {
        const b = await both();
        let during = null;
        const got = await collect(await gw.chat.completions.create(
            { model: MODEL, messages, stream: true }), async (c, n) => {
            if (n === 5) during = await both();
        });
        assert.equal(chatText(got.chunks), 'sim '.repeat(TOKENS));
        await sleep(300); // the worker's settle and last message
        const a = await both();
        for (const [side, p] of [['gateway', 'llmq_gateway_'], ['worker', 'llmq_worker_']]) {
            const k = side === 'gateway' ? 'g' : 'w';
            const d = (name, labels) => a[k](p + name, labels) - (b[k](p + name, labels) || 0);
            assert.equal(during[k](p + 'streams_in_progress'), 1, `${side}: in progress while streaming`);
            assert.equal(a[k](p + 'streams_in_progress'), 0, `${side}: in progress after`);
            assert.equal(d('streams_total', 'end="completed"'), 1, `${side}: completed`);
            // every chunk the client read, and the [DONE] it did not see
            assert.equal(d('stream_events_total'), got.chunks.length + 1, `${side}: events relayed`);
            assert.ok(d('stream_messages_total') >= 2, `${side}: relay messages`);
            assert.equal(d('stream_ttft_seconds_count'), 1, `${side}: time to first token`);
            assert.equal(d('stream_duration_seconds_count'), 1, `${side}: stream duration`);
            // the stream lasted at least its 29 gaps of 20 ms
            assert.ok(d('stream_duration_seconds_sum') >= 0.5, `${side}: duration sum`);
            assert.ok(d('stream_ttft_seconds_sum') >= (LATENCY_MS - 50) / 1000,
                `${side}: ttft includes the server's wait`);
        }
    }],
    ['a call\'s body is decoded once, streamed or synchronous', async () => {
        const name = 'llmq_gateway_call_bodies_decoded_total';
        const b = await scrape(gwMetricsUrl);
        const got = await collect(await gw.chat.completions.create(
            { model: MODEL, messages, stream: true }));
        assert.equal(chatText(got.chunks), 'sim '.repeat(TOKENS));
        const mid = await scrape(gwMetricsUrl);
        assert.equal(mid(name) - b(name), 1, 'a streamed call\'s body decoded more than once');
        const sync = await gw.chat.completions.create({ model: MODEL, messages });
        assert.equal(sync.choices[0].message.content, 'sim '.repeat(TOKENS));
        const a = await scrape(gwMetricsUrl);
        assert.equal(a(name) - mid(name), 1, 'a synchronous call\'s body decoded more than once');
    }],
    ['/metrics of both: a client aborting mid-stream counts one aborted stream', async () => {
        const b = await both();
        try {
            await collect(await gw.chat.completions.create({ model: MODEL, messages, stream: true }),
                async (c, n) => {
                    if (n === 5) throw new Error('leaving');
                });
        } catch (e) {
            if (e.message !== 'leaving') throw e;
        }
        await waitLog((log) => log.filter((l) => l.outcome === 'client_closed'));
        await sleep(300);
        const a = await both();
        assert.equal(a.g('llmq_gateway_streams_total', 'end="aborted"') -
            (b.g('llmq_gateway_streams_total', 'end="aborted"') || 0), 1, 'gateway: aborted');
        assert.equal(a.w('llmq_worker_streams_total', 'end="aborted"') -
            (b.w('llmq_worker_streams_total', 'end="aborted"') || 0), 1, 'worker: aborted');
        assert.equal(a.g('llmq_gateway_streams_in_progress'), 0);
        assert.equal(a.w('llmq_worker_streams_in_progress'), 0);
    }],
    ['a client gone before the first message: upstream aborted, job settled on what was used', async () => {
        const seen = simLog().length;
        const before = bucket(MODEL).tokens_used;
        const ac = new AbortController();
        const call = gw.chat.completions.create({ model: MODEL, messages, stream: true },
            { signal: ac.signal });
        // by then the request reached the server, which waits LATENCY_MS
        // before its first chunk
        await sleep(150);
        ac.abort();
        await assert.rejects(call, /abort/i);
        const line = (await waitLog((log) => log.slice(seen).filter((l) =>
            l.client_request_id !== '')))[0];
        assert.equal(line.outcome, 'client_closed', JSON.stringify(line));
        // the worker hung up before the server's first chunk was due (the
        // server logs when it sees the hang-up), not when that chunk came
        assert.ok(line.latency_ms < LATENCY_MS, `the upstream call ended after ${line.latency_ms} ms: ` +
            'not aborted before its first chunk');
        assert.equal(line.completion_tokens, 0, 'the server sent tokens: not aborted in time');
        const res = result(line.client_request_id);
        assert.equal(res.error.code, 'client_closed', JSON.stringify(res));
        for (let i = 0; i < 100 && inFlight() > 0; i++) await sleep(100);
        assert.equal(inFlight(), 0, 'a job is still in flight');
        const used = bucket(MODEL).tokens_used - before;
        assert.equal(used, line.prompt_tokens, `bucket charged ${used}, the server counted ` +
            `${line.prompt_tokens} prompt tokens and no completion`);
    }],
    ['/readyz is 503 naming the relay while it cannot subscribe, 200 after', async () => {
        assert.equal((await readyz())[0], 200);
        // Redis refuses this account's pub/sub (an ACL) and drops the
        // subscribed connections; the gateway's comes back and is refused
        redis('ACL', 'SETUSER', 'default', 'resetchannels');
        try {
            redis('CLIENT', 'KILL', 'TYPE', 'pubsub');
            let st = null;
            for (let i = 0; i < 100; i++) {
                st = await readyz();
                if (st[0] === 503) break;
                await sleep(50);
            }
            assert.equal(st[0], 503, 'still ready without a relay');
            assert.match(st[1], /stream relay/);
            await sleep(1000); // it connects again meanwhile, and is refused again
            st = await readyz();
            assert.equal(st[0], 503, 'ready again while the relay is refused');
            const e = await gw.chat.completions.create({ model: MODEL, messages, stream: true })
                .then(() => null, (err) => err);
            assert.equal(e?.status, 503, 'a streamed call without a relay is no 503');
        } finally {
            redis('ACL', 'SETUSER', 'default', 'allchannels');
        }
        let st = null;
        for (let i = 0; i < 200; i++) {
            st = await readyz();
            if (st[0] === 200) break;
            await sleep(50);
        }
        assert.equal(st[0], 200, `not ready again: ${st[1]}`);
        const g = await collect(await gw.chat.completions.create({ model: MODEL, messages, stream: true }));
        assert.equal(chatText(g.chunks), 'sim '.repeat(TOKENS));
    }],
    ['the worker started here stops', async () => {
        worker.kill('SIGTERM');
    }],
]);
