// A gateway Batch that may wait the provider's window goes to the provider's
// Batch API under the model's offload policy `all` (docs/DESIGN.md §3.10),
// with the official `openai` npm package as the client (tests/gateway/stack.sh
// starts the stack; tests/gateway.cmake sets the sim's batch pace).
//   1. files.create + batches.create(completion_window "24h") of 30 lines of
//      gpt-4o-mini under `llmq offload set gpt-4o-mini --mode all`: the batch
//      completes; its output file has each line exactly once, with its
//      custom_id and the response shape of a live line (compared with a
//      batch of the same lines of gpt-4o, whose policy is off: live); every
//      offloaded line says so (offloaded, provider_batch_id); openai-sim saw
//      no live call of gpt-4o-mini, and its own Batch API holds the lines
//      (batches whose metadata names llmq's batch, 30 requests in all).
//   2. A batch whose completion_window is no duration, or one longer than
//      the gateway's --max-window-hours, gets OpenAI's 400 error shape
//      (BadRequestError, invalid_request_error, param completion_window).
// Exit 0 when every step passed; a failed step prints what differed.
import assert from 'node:assert/strict';
import fs from 'node:fs';

import {
    toFile, apiKey, clientFor, chatLine, pollBatch, runSteps, llmqCli as llmq, simGet,
} from './sdk.mjs';

const client = clientFor(apiKey);
const simLog = () => fs.readFileSync(process.env.SIM_LOG, 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l));
const N = 30;

// Runs a batch of N lines of model with completion_window "24h"; returns
// its output lines by custom_id.
async function runBatch(model, tag) {
    const lines = [];
    for (let i = 0; i < N; i++) lines.push(chatLine(`${tag}-${i}`, model, `line ${i} of ${tag}`));
    const file = await client.files.create({
        file: await toFile(Buffer.from(lines.join('\n') + '\n'), `${tag}.jsonl`), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    assert.equal(batch.completion_window, '24h');
    const end = await pollBatch(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'],
        240000);
    assert.equal(end.status, 'completed', `${tag}: batch ${end.status}`);
    assert.deepEqual(end.request_counts, { total: N, completed: N, failed: 0 });
    assert.ok(end.output_file_id, `${tag}: no output file`);
    const text = await (await client.files.content(end.output_file_id)).text();
    const out = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.equal(out.length, N, `${tag}: output lines`);
    const byId = new Map();
    for (const o of out) {
        assert.ok(!byId.has(o.custom_id), `${tag}: ${o.custom_id} twice`);
        byId.set(o.custom_id, o);
    }
    for (let i = 0; i < N; i++) assert.ok(byId.has(`${tag}-${i}`), `${tag}-${i} missing`);
    return { batch, byId };
}

// The keys of a live line's shape, nested: {id, custom_id, response:
// {status_code, request_id, body: {...}}, error}.
function shape(o) {
    const keys = (x) => Object.keys(x).sort();
    return { line: keys(o).filter((k) => k !== 'offloaded' && k !== 'provider_batch_id'),
        response: keys(o.response), body: keys(o.response.body),
        message: keys(o.response.body.choices[0].message), usage: keys(o.response.body.usage) };
}

async function offloadedBatch() {
    llmq('offload', 'set', 'gpt-4o-mini', '--mode', 'all', '--poll-ms', '100');
    const before = simLog().length;
    const live = await runBatch('gpt-4o', 'live');
    const off = await runBatch('gpt-4o-mini', 'off');
    const liveShape = shape(live.byId.get('live-0'));
    const pbIds = new Set();
    for (const [id, o] of off.byId) {
        assert.equal(o.response.status_code, 200, `${id}: status`);
        assert.equal(o.error, null, `${id}: error`);
        assert.equal(o.response.body.model.startsWith('gpt-4o-mini'), true, `${id}: model`);
        assert.equal(o.offloaded, true, `${id}: not marked offloaded`);
        assert.match(o.provider_batch_id, /^batch_/, `${id}: provider_batch_id`);
        pbIds.add(o.provider_batch_id);
        assert.deepEqual(shape(o), liveShape, `${id}: not a live line's shape`);
    }
    for (const [id, o] of live.byId) {
        assert.equal(o.offloaded, undefined, `${id}: policy off, yet offloaded`);
    }
    // the sim answered gpt-4o live and gpt-4o-mini only through its Batch API
    const calls = simLog().slice(before).filter((l) => l.path === '/v1/chat/completions');
    assert.equal(calls.filter((l) => l.model === 'gpt-4o').length, N, 'live calls of gpt-4o');
    assert.equal(calls.filter((l) => l.model === 'gpt-4o-mini').length, 0,
        'gpt-4o-mini was called live');
    const sim = await simGet('/batches');
    const ours = sim.data.filter((b) => pbIds.has(b.id));
    assert.equal(ours.length, pbIds.size, 'provider batches named by the lines');
    let lines = 0;
    for (const b of ours) {
        assert.equal(b.status, 'completed');
        assert.match(b.metadata.llmq_batch_id, /^pb-/);
        lines += b.request_counts.total;
    }
    assert.equal(lines, N, 'lines in the provider batches');
    // and llmq offload list shows them ended, with their provider ids
    const list = llmq('offload', 'list');
    for (const b of ours) assert.match(list, new RegExp(b.id), 'offload list names ' + b.id);
}

async function badWindow() {
    const file = await client.files.create({
        file: await toFile(Buffer.from(chatLine('w-0', 'gpt-4o-mini', 'hi') + '\n'), 'w.jsonl'),
        purpose: 'batch' });
    for (const w of ['soon', '200h', '24']) {
        await assert.rejects(client.batches.create({ input_file_id: file.id,
            endpoint: '/v1/chat/completions', completion_window: w }), (e) => {
            assert.equal(e.status, 400, `${w}: status`);
            assert.equal(e.type, 'invalid_request_error', `${w}: type`);
            assert.equal(e.param, 'completion_window', `${w}: param`);
            assert.equal(e.code, 'invalid_value', `${w}: code`);
            assert.match(e.message, /completion_window/);
            return true;
        });
    }
}

await runSteps([
    ['a 24h batch under policy all goes to the provider batch API', offloadedBatch],
    ['a bad completion_window is a 400 of OpenAI shape', badWindow],
]);
