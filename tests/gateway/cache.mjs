// ctest gateway_cache: the response cache through llmq-gateway with the
// official openai npm package as the client (docs/cache.md), against an
// openai-sim whose access log counts the upstream calls:
//   - the same request twice with x-llmq-cache: use: one upstream call; the
//     second answer is the first's (the same response id);
//   - another tenant's key asking the same is not answered from it: a call;
//   - a streamed request hits the entry a non-streamed one stored: a correct
//     chat stream (the text, a finish_reason, [DONE] ends it), the usage
//     chunk only when asked; and the reverse: a streamed answer is stored
//     whole and a non-streamed request gets it;
//   - the Responses API: a streamed request replayed from a stored response
//     as its named events, response.completed holding the stored response;
//   - 50 identical requests at once, sync and streamed mixed: one upstream
//     call, 50 answers with the same response id;
//   - x-llmq-cache: off calls the API though an entry is stored; a bad
//     header value is a 400 naming it;
//   - a key made with --cache use caches its calls without the header (a
//     header still overrides it); a key without it does not;
//   - an answer cut off at max_tokens is stored only with
//     x-llmq-cache-store-truncated: true and served only to calls that send it;
//   - gateway Batch lines: lines with "llmq": {"cache": "use"} repeating a
//     stored request are answered from it (cached: true, its response id),
//     identical new lines make one upstream call; a key's --cache use
//     default covers lines that ask nothing.
import assert from 'node:assert/strict';

import { clientFor, apiKey, newKey, pollBatch, runSteps, toFile } from './sdk.mjs';
import { chatText, collect, simLog } from './stream_lib.mjs';

const gw = clientFor(apiKey); // tenant acme (stack.sh)
const other = clientFor(newKey('--tenant', 'globex'));
const MODEL = 'gpt-4o-mini';
const use = { headers: { 'x-llmq-cache': 'use' } };
const calls = () => simLog().filter((l) => l.client_request_id !== '').length;
// The upstream calls since `before`, once at least `want` are in the sim's
// access log: the sim writes a request's line a few ms after its answer (later
// on a busy host), so the count is read when the line is there, not at once.
// Bounded: after 10 s it returns what it has, and the assertion names it.
const upstream = async (before, want) => {
    for (let waited = 0; calls() - before < want && waited < 10000; waited += 20) {
        await new Promise((r) => setTimeout(r, 20));
    }
    return calls() - before;
};
const ask = (text) => ({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: text }] });

await runSteps([
    ['the same request twice: one upstream call, the same answer', async () => {
        const before = calls();
        const a = await gw.chat.completions.create(ask('q1'), use);
        const b = await gw.chat.completions.create(ask('q1'), use);
        assert.equal(await upstream(before, 1), 1);
        assert.equal(b.id, a.id);
        assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    }],
    ["another tenant's key is not answered from it", async () => {
        const before = calls();
        const a = await gw.chat.completions.create(ask('q1'), use);
        const o = await other.chat.completions.create(ask('q1'), use);
        assert.equal(await upstream(before, 1), 1, 'globex called the API once, acme not at all');
        assert.notEqual(o.id, a.id);
    }],
    ['a stream hits a non-streamed entry: chunks, finish_reason, usage only when asked', async () => {
        const whole = await gw.chat.completions.create(ask('q2'), use);
        const before = calls();
        const s = await collect(await gw.chat.completions.create({ ...ask('q2'), stream: true }, use));
        assert.equal(chatText(s.chunks), whole.choices[0].message.content);
        assert.equal(s.chunks[0].object, 'chat.completion.chunk');
        assert.equal(s.chunks[0].id, whole.id);
        assert.equal(s.chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
        for (const c of s.chunks) assert.ok(!('usage' in c), 'a chunk carries usage, not asked');
        const u = await collect(await gw.chat.completions.create(
            { ...ask('q2'), stream: true, stream_options: { include_usage: true } }, use));
        const last = u.chunks.at(-1);
        assert.deepEqual(last.choices, []);
        assert.deepEqual(last.usage, whole.usage);
        assert.equal(u.chunks.filter((c) => c.usage).length, 1);
        assert.equal(calls() - before, 0);
    }],
    ['a streamed answer is stored whole: a non-streamed request gets it', async () => {
        const before = calls();
        const s = await collect(await gw.chat.completions.create({ ...ask('q3'), stream: true }, use));
        const whole = await gw.chat.completions.create(ask('q3'), use);
        assert.equal(await upstream(before, 1), 1);
        assert.equal(whole.choices[0].message.content, chatText(s.chunks));
        assert.equal(whole.id, s.chunks[0].id);
    }],
    ['the Responses API: a stored response replayed as its events', async () => {
        const body = { model: MODEL, input: 'q4', max_output_tokens: 100 };
        const whole = await gw.responses.create(body, use);
        const before = calls();
        const s = await collect(await gw.responses.create({ ...body, stream: true }, use));
        assert.equal(calls() - before, 0);
        const types = s.chunks.map((e) => e.type);
        assert.equal(types[0], 'response.created');
        assert.equal(types.at(-1), 'response.completed');
        const text = s.chunks.filter((e) => e.type === 'response.output_text.delta')
            .map((e) => e.delta).join('');
        assert.equal(text, whole.output_text);
        assert.equal(s.chunks.at(-1).response.id, whole.id);
        assert.deepEqual(s.chunks.at(-1).response.usage, whole.usage);
    }],
    ['50 identical requests at once, sync and streamed: one upstream call', async () => {
        const before = calls();
        const all = [];
        for (let i = 0; i < 50; i++) {
            all.push(i % 2
                ? gw.chat.completions.create(ask('q5'), use).then((r) => r.id)
                : gw.chat.completions.create({ ...ask('q5'), stream: true }, use)
                    .then((st) => collect(st)).then((g) => g.chunks[0].id));
        }
        const ids = await Promise.all(all);
        assert.equal(ids.length, 50);
        assert.equal(new Set(ids).size, 1, `answers of ${new Set(ids).size} calls`);
        assert.equal(await upstream(before, 1), 1);
    }],
    ['x-llmq-cache: off calls the API; a bad value is a 400', async () => {
        const before = calls();
        await gw.chat.completions.create(ask('q1'), { headers: { 'x-llmq-cache': 'off' } });
        assert.equal(await upstream(before, 1), 1);
        await assert.rejects(gw.chat.completions.create(ask('q1'),
            { headers: { 'x-llmq-cache': 'maybe' } }), (e) => e.status === 400);
    }],
    ["a key's default (keys create --cache use): no header needed; a header overrides it", async () => {
        const keyed = clientFor(newKey('--tenant', 'initech', '--cache', 'use', '--cache-ttl-s', '600'));
        const before = calls();
        const a = await keyed.chat.completions.create(ask('q6'));
        const b = await keyed.chat.completions.create(ask('q6'));
        assert.equal(await upstream(before, 1), 1, 'the second call was answered from the cache');
        assert.equal(b.id, a.id);
        await keyed.chat.completions.create(ask('q6'), { headers: { 'x-llmq-cache': 'off' } });
        assert.equal(await upstream(before, 2), 2, 'x-llmq-cache: off called the API');
        /* a key without the default does not cache: the same request twice, two calls */
        const plain = clientFor(newKey('--tenant', 'initech'));
        await plain.chat.completions.create(ask('q7'));
        await plain.chat.completions.create(ask('q7'));
        assert.equal(await upstream(before, 4), 4);
    }],
    ['a cut-off answer is stored only when asked, and served only to who asks', async () => {
        // openai-sim answers max_tokens 5 with 5 tokens and finish_reason "length"
        const cut = { model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'q11' }] };
        const trunc = { headers: { 'x-llmq-cache': 'use', 'x-llmq-cache-store-truncated': 'true' } };
        const before = calls();
        const a = await gw.chat.completions.create(cut, use);
        assert.equal(a.choices[0].finish_reason, 'length');
        const b = await gw.chat.completions.create(cut, use);
        assert.notEqual(b.id, a.id, 'a cut-off answer was stored though not asked');
        const c = await gw.chat.completions.create(cut, trunc);
        const d = await gw.chat.completions.create(cut, trunc);
        assert.equal(d.id, c.id, 'asked: the cut-off answer is stored and served');
        assert.equal(d.choices[0].finish_reason, 'length');
        const e = await gw.chat.completions.create(cut, use);
        assert.notEqual(e.id, c.id, 'a stored cut-off answer served to a request that did not ask');
        assert.equal(await upstream(before, 4), 4);
        await assert.rejects(gw.chat.completions.create(cut,
            { headers: { 'x-llmq-cache-store-truncated': 'yes' } }),
            (err) => err.status === 400 && /x-llmq-cache-store-truncated/.test(err.message));
    }],
    ['gateway Batch lines: a stored request is a hit, identical new lines one call', async () => {
        const stored = await gw.chat.completions.create(ask('q8'), use);
        const before = calls();
        const line = (id, body, llmq) => JSON.stringify({ custom_id: id, method: 'POST',
            url: '/v1/chat/completions', body, ...(llmq ? { llmq } : {}) });
        const lines = [];
        for (let i = 0; i < 3; i++) lines.push(line(`hit-${i}`, ask('q8'), { cache: 'use' }));
        for (let i = 0; i < 3; i++) lines.push(line(`new-${i}`, ask('q9'), { cache: 'use' }));
        lines.push(line('plain', ask('q8'))); // asks nothing, its key has no default: a call
        const out = await runBatch(gw, lines);
        for (let i = 0; i < 3; i++) {
            assert.equal(out[`hit-${i}`].cached, true, `hit-${i} not from the cache`);
            assert.equal(out[`hit-${i}`].response.body.id, stored.id);
        }
        const ids = new Set([0, 1, 2].map((i) => out[`new-${i}`].response.body.id));
        assert.equal(ids.size, 1, 'identical new lines got different answers');
        assert.equal([0, 1, 2].filter((i) => out[`new-${i}`].cached === true).length, 2);
        assert.notEqual(out.plain.cached, true);
        assert.equal(await upstream(before, 2), 2, 'q9 once and the plain line');
        // a key whose default is use: lines that ask nothing are cached too
        const keyed = clientFor(newKey('--tenant', 'umbrella', '--cache', 'use'));
        const before2 = calls();
        const k = await runBatch(keyed, [line('k-0', ask('q10')), line('k-1', ask('q10'))]);
        assert.equal(k['k-0'].response.body.id, k['k-1'].response.body.id);
        assert.equal(await upstream(before2, 1), 1);
    }],
]);

// Uploads lines as a Batch file, runs it to completion with client and
// returns its output lines by custom_id.
async function runBatch(client, lines) {
    const file = await client.files.create({
        file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'cache.jsonl'), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await pollBatch(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'],
        60000);
    assert.equal(done.status, 'completed');
    assert.equal(done.request_counts.completed, lines.length);
    const text = await (await client.files.content(done.output_file_id)).text();
    const out = {};
    for (const l of text.split('\n').filter(Boolean)) {
        const o = JSON.parse(l);
        out[o.custom_id] = o;
    }
    return out;
}
