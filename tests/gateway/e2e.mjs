// llmq-gateway end to end with the official `openai` npm package as the
// client, against llmq-gateway + llmq-workers + openai-sim (tests/gateway/
// stack.sh starts them; tests/gateway.cmake sets the limits named below).
//   1. Batch: upload a file, create a batch, poll it to `completed`, download
//      the output and error files and check every line.
//   2. 50 concurrent clients, synchronous chat and embeddings under limits
//      that bind (llmq and the server both allow 40 requests per 2 s window
//      and model): every call succeeds, no client sees a 429, the server's
//      access log shows no limit 429.
//   3. Cancel a batch mid-run: the jobs not yet sent are never sent.
//   4. List batches with pagination; files list, retrieve, content, delete;
//      a wrong key is a 401.
// Exit 0 when every check passed; a failed check prints what differed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { OpenAI, toFile, baseURL, apiKey, clientFor, chatLine, pollBatch as poll, runSteps }
    from './sdk.mjs';

const client = clientFor(apiKey);
const simLog = () => fs.readFileSync(process.env.SIM_LOG, 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l));
const pollBatch = (id, until, limitMs) => poll(client, id, until, limitMs);

async function batchRoundTrip() {
    const lines = [];
    for (let i = 0; i < 40; i++) {
        // three lines name a model the server does not know: 404s, the error file
        const model = i % 13 === 5 ? 'gpt-unknown' : 'gpt-4o-mini';
        // custom_ids as OpenAI takes them: some with spaces, '/', '|', '%'
        const id = i % 4 === 1 ? `req-${i} of batch/a|b %41` : `req-${i}`;
        lines.push(chatLine(id, model, `hello number ${i}`));
    }
    const file = await client.files.create({
        file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'input.jsonl'),
        purpose: 'batch' });
    assert.equal(file.object, 'file');
    assert.equal(file.purpose, 'batch');
    assert.equal(file.bytes, Buffer.byteLength(lines.join('\n') + '\n'));
    const batch = await client.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h',
        metadata: { purpose: 'e2e' } });
    assert.match(batch.id, /^batch_/);
    assert.ok(['validating', 'in_progress'].includes(batch.status), batch.status);
    assert.equal(batch.request_counts.total, 40);
    assert.deepEqual(batch.metadata, { purpose: 'e2e' });
    const done = await pollBatch(batch.id, ['completed', 'failed', 'expired', 'cancelled'], 60000);
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.request_counts, { total: 40, completed: 37, failed: 3 });
    assert.ok(done.output_file_id && done.error_file_id);
    const out = (await (await client.files.content(done.output_file_id)).text())
        .split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const err = (await (await client.files.content(done.error_file_id)).text())
        .split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.equal(out.length, 37);
    assert.equal(err.length, 3);
    const want = new Set(lines.map((l) => JSON.parse(l).custom_id));
    for (const o of out) {
        assert.ok(want.delete(o.custom_id), `unexpected or repeated custom_id ${o.custom_id}`);
        // OpenAI's ids are batch_req_<hex>: the request id's own req_ is not repeated
        assert.match(o.id, /^batch_req_/);
        assert.ok(!o.id.startsWith('batch_req_req_'), `output id ${o.id}`);
        assert.equal(o.error, null);
        assert.equal(o.response.status_code, 200);
        assert.equal(o.response.body.object, 'chat.completion');
        assert.ok(o.response.request_id);
        assert.ok(o.response.body.choices[0].message.content.length > 0);
    }
    for (const e of err) {
        assert.ok(want.delete(e.custom_id), `unexpected or repeated custom_id ${e.custom_id}`);
        const i = parseInt(e.custom_id.slice(4), 10);
        assert.equal(i % 13, 5, `${e.custom_id} should have succeeded`);
        assert.equal(e.response.status_code, 404);
        assert.equal(e.response.body.error.code, 'model_not_found');
    }
    assert.equal(want.size, 0, `lines missing from both files: ${[...want]}`);
    // the input file is kept as uploaded
    const again = await (await client.files.content(file.id)).text();
    assert.equal(again, lines.join('\n') + '\n');
    return [file.id, batch.id];
}

async function concurrentSyncCalls() {
    const before = simLog().length;
    const clients = [];
    let seen429 = 0;
    for (let c = 0; c < 50; c++) {
        clients.push((async () => {
            for (let k = 0; k < 2; k++) {
                try {
                    const chat = await client.chat.completions.create({ model: 'gpt-4o-mini',
                        max_tokens: 8, user: `client-${c}`,
                        messages: [{ role: 'user', content: `client ${c} call ${k}` }] });
                    assert.equal(chat.object, 'chat.completion');
                    assert.ok(chat.choices[0].message.content.length > 0);
                    const emb = await client.embeddings.create({ model: 'text-embedding-3-small',
                        input: `client ${c} call ${k}` });
                    assert.equal(emb.data.length, 1);
                    assert.ok(emb.data[0].embedding.length > 0);
                } catch (e) {
                    if (e.status === 429) seen429++;
                    throw e;
                }
            }
        })());
    }
    const results = await Promise.allSettled(clients);
    const failed = results.filter((r) => r.status === 'rejected');
    assert.equal(seen429, 0, 'a client saw a 429 although no wait exceeded the maximum');
    assert.equal(failed.length, 0, `calls failed: ${failed.map((f) => f.reason).join('; ')}`);
    const log = simLog().slice(before);
    const calls = log.filter((l) => ['gpt-4o-mini', 'text-embedding-3-small'].includes(l.model));
    assert.equal(calls.length, 200, 'each call reached the server once');
    const limited = calls.filter((l) => l.status === 429);
    assert.equal(limited.length, 0, `${limited.length} limit 429s at the server`);
    // the limit did bind: 100 requests per model in windows of 40
    const t = calls.filter((l) => l.model === 'gpt-4o-mini').map((l) => l.t_ms).sort((a, b) => a - b);
    assert.ok(t[t.length - 1] - t[0] >= 2000, 'the limit should have spread the calls out');
}

async function cancelMidRun() {
    const lines = [];
    for (let i = 0; i < 60; i++) lines.push(chatLine(`slow-${i}`, 'gpt-4o', `slow ${i}`));
    const file = await client.files.create({
        file: await toFile(Buffer.from(lines.join('\n')), 'slow.jsonl'), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '1h' });
    const start = Date.now();
    for (;;) {
        const b = await client.batches.retrieve(batch.id);
        if (b.request_counts.completed >= 1) break;
        assert.ok(Date.now() - start < 30000, 'no job of the slow batch ran');
        await sleep(100);
    }
    const c = await client.batches.cancel(batch.id);
    assert.ok(['cancelling', 'cancelled'].includes(c.status), c.status);
    const end = await pollBatch(batch.id, ['cancelled'], 30000);
    const { total, completed, failed } = end.request_counts;
    assert.equal(total, 60);
    assert.equal(completed + failed, 60);
    assert.ok(failed >= 40, `only ${failed} of 60 cancelled`);
    assert.ok(end.cancelling_at && end.cancelled_at);
    const err = (await (await client.files.content(end.error_file_id)).text())
        .split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.equal(err.length, failed);
    for (const e of err) assert.equal(e.error.code, 'cancelled');
    await sleep(3000); // a cancelled job that was sent anyway would reach the server by now
    const sent = simLog().filter((l) => l.model === 'gpt-4o');
    assert.equal(sent.length, completed, 'only the jobs that completed reached the server');
    // cancelling again: the batch has ended
    await assert.rejects(client.batches.cancel(batch.id), (e) => e.status === 409);
    return [file.id, batch.id];
}

async function listsAndFiles(fileIds, batchIds) {
    for (let i = 0; i < 2; i++) {
        const f = await client.files.create({
            file: await toFile(Buffer.from(chatLine(`x-${i}`, 'gpt-4o-mini', 'hi')), 'x.jsonl'),
            purpose: 'batch' });
        const b = await client.batches.create({ input_file_id: f.id,
            endpoint: '/v1/chat/completions', completion_window: '24h' });
        fileIds.push(f.id);
        batchIds.push(b.id);
    }
    // newest first, one per page, following `after`
    const seen = [];
    let page = await client.batches.list({ limit: 1 });
    for (;;) {
        assert.ok(page.data.length <= 1);
        seen.push(...page.data.map((b) => b.id));
        if (!page.hasNextPage()) break;
        page = await page.getNextPage();
    }
    assert.deepEqual(seen, [...batchIds].reverse());
    const two = await client.batches.list({ limit: 2 });
    assert.equal(two.data.length, 2);
    assert.equal(two.data[0].id, batchIds[batchIds.length - 1]);
    // files
    const files = [];
    for await (const f of client.files.list()) files.push(f.id);
    assert.deepEqual(files.sort(), [...fileIds].sort());
    const one = await client.files.retrieve(fileIds[0]);
    assert.equal(one.id, fileIds[0]);
    const del = await client.files.del(fileIds[0]);
    assert.equal(del.deleted, true);
    await assert.rejects(client.files.retrieve(fileIds[0]), (e) => e.status === 404);
    await assert.rejects(client.batches.retrieve('batch_unknown'), (e) => e.status === 404);
    // a wrong key
    const bad = new OpenAI({ baseURL, apiKey: 'llmqgw-wrong', maxRetries: 0 });
    await assert.rejects(bad.models ? bad.batches.list() : null, (e) => e.status === 401 &&
        e.error?.code === 'invalid_api_key');
}

const fileIds = [], batchIds = [];
const keeping = (f) => async () => {
    const [fileId, batchId] = await f();
    fileIds.push(fileId);
    batchIds.push(batchId);
};
await runSteps([['batch round trip', keeping(batchRoundTrip)],
    ['50 concurrent clients', concurrentSyncCalls], ['cancel mid-run', keeping(cancelMidRun)],
    ['lists, files, wrong key', () => listsAndFiles(fileIds, batchIds)]]);
