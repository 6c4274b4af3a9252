// A gateway Batch cancelled while its jobs sit in a provider batch
// (docs/DESIGN.md §3.10, "Cancel"), with the official `openai` npm package
// as the client. openai-sim holds its batches (--batch-hold, set in
// tests/gateway.cmake: no progress until SIGUSR2, which this test never
// sends), so the cancel finds every job in the provider's hands, whatever
// the host's speed.
//   batches.create(completion_window "24h") of N lines of gpt-4o-mini under
//   `llmq offload set gpt-4o-mini --mode all`; once openai-sim holds one
//   provider batch of those N lines (metadata llmq_batch_id), in progress,
//   batches.cancel:
//     - the gateway's batch ends cancelled: N failed, none completed, no
//       output file (no result stored), each error line `cancelled`;
//     - the provider batch is cancelled at the provider (its status
//       cancelled) and llmq's record of it ends with none done;
//     - no line was ever called live.
// Exit 0 when every step passed; a failed step prints what differed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import {
    toFile, apiKey, clientFor, chatLine, pollBatch, runSteps, llmqCli as llmq, simGet,
} from './sdk.mjs';

const client = clientFor(apiKey);
const N = 8;

// Waits (up to limitMs: a bound against a hang) until the sim holds a
// batch made by llmq (metadata llmq_batch_id) for which want(batch) holds.
async function simBatch(want, limitMs) {
    const start = Date.now();
    for (;;) {
        const list = await simGet('/batches');
        const b = list.data.find((x) => x.metadata && x.metadata.llmq_batch_id && want(x));
        if (b) return b;
        assert.ok(Date.now() - start < limitMs, 'no such provider batch in the sim');
        await sleep(100);
    }
}

async function cancelWhileOffloaded() {
    llmq('offload', 'set', 'gpt-4o-mini', '--mode', 'all', '--poll-ms', '100');
    const lines = [];
    for (let i = 0; i < N; i++) lines.push(chatLine(`cx-${i}`, 'gpt-4o-mini', `line ${i}`));
    const file = await client.files.create({
        file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'cx.jsonl'), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    // every job in one provider batch the sim holds
    const held = await simBatch((b) => b.request_counts.total === N &&
        b.status === 'in_progress', 120000);
    const pb = held.metadata.llmq_batch_id;
    const c = await client.batches.cancel(batch.id);
    assert.ok(['cancelling', 'cancelled'].includes(c.status), c.status);
    const end = await pollBatch(client, batch.id, ['cancelled', 'completed', 'failed', 'expired'],
        120000);
    assert.equal(end.status, 'cancelled');
    assert.deepEqual(end.request_counts, { total: N, completed: 0, failed: N });
    assert.ok(!end.output_file_id, `an output file: ${end.output_file_id}`);
    assert.ok(end.error_file_id, 'no error file');
    const err = (await (await client.files.content(end.error_file_id)).text())
        .split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.equal(err.length, N, 'error lines');
    const seen = new Set();
    for (const e of err) {
        assert.equal(e.error.code, 'cancelled', `${e.custom_id}: ${JSON.stringify(e.error)}`);
        assert.equal(e.response, null, `${e.custom_id}: a response was stored`);
        seen.add(e.custom_id);
    }
    assert.equal(seen.size, N, 'each line once');
    // the provider batch is cancelled at the provider: a worker sends the
    // cancel once none of its jobs is left
    const gone = await simBatch((b) => b.id === held.id && b.status === 'cancelled', 120000);
    assert.equal(gone.request_counts.completed, 0);
    // llmq's record of it ends, nothing done from it
    const start = Date.now();
    for (;;) {
        const show = llmq('offload', 'show', pb);
        if (show.includes('state: ended\n')) {
            assert.match(show, /\ndone: 0\n/);
            assert.match(show, new RegExp(`batch_id: ${held.id}\n`));
            break;
        }
        assert.ok(Date.now() - start < 120000, `provider batch ${pb} never ended:\n${show}`);
        await sleep(200);
    }
    // and no line went live
    const calls = fs.readFileSync(process.env.SIM_LOG, 'utf8').split('\n').filter(Boolean)
        .map((l) => JSON.parse(l)).filter((l) => l.path === '/v1/chat/completions');
    assert.equal(calls.length, 0, 'lines were called live');
}

await runSteps([
    ['a cancelled 24h batch whose jobs sit in a provider batch cancels that batch', cancelWhileOffloaded],
]);
