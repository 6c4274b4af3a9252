// Gateway keys as boundaries, with the official `openai` npm package as the
// client (tests/gateway/stack.sh starts the stack; tests/gateway.cmake sets
// the models and limits named here).
//   1. Every restriction of a key on every job-creating path: keys without
//      restriction, --models gpt-4o, --models gpt-4o-mini (each a prefix of
//      the other), a --models list and a pinned --user, against chat
//      completions, completions, embeddings, responses, and file upload +
//      batch creation. A refused call is a NotFoundError model_not_found
//      (param model); a refused batch a BadRequestError model_not_found
//      naming the line, custom_id and model, with no batch listed after.
//   2. models.list() and models.retrieve(): what each key may use.
//   3. Tenant isolation of content: another tenant's key and a key without a
//      tenant get NotFoundError for a tenant's file content, its deletion,
//      its batch's output and error files, the batch, its cancel, and a
//      batch made from the file; the owner's objects are untouched after.
// Exit 0 when every step passed; a failed step prints what differed.
import assert from 'node:assert/strict';

import { toFile, apiKey, clientFor, newKey, chatLine, pollBatch, runSteps } from './sdk.mjs';

const acme = clientFor(apiKey); // --tenant acme
const keys = {
    'no restriction': acme,
    '--models gpt-4o': clientFor(newKey('--tenant', 'acme', '--models', 'gpt-4o')),
    '--models gpt-4o-mini': clientFor(newKey('--tenant', 'acme', '--models', 'gpt-4o-mini')),
    '--models list': clientFor(newKey('--tenant', 'acme', '--models',
        'gpt-4o-mini,text-embedding-3-small')),
};

const paths = {
    chat: (c, model) => c.chat.completions.create({ model, max_tokens: 5,
        messages: [{ role: 'user', content: 'hi' }] }),
    completions: (c, model) => c.completions.create({ model, prompt: 'hi', max_tokens: 5 }),
    embeddings: (c, model) => c.embeddings.create({ model, input: 'hi' }),
    responses: (c, model) => c.responses.create({ model, input: 'hi' }),
};

async function allowed(keyName, path, model) {
    const what = `${keyName}: ${path} ${model}`;
    const r = await paths[path](keys[keyName], model);
    assert.ok(r && r.object, `${what}: no answer`);
}

async function refused(keyName, path, model) {
    await assert.rejects(paths[path](keys[keyName], model), (e) => {
        assert.equal(e.status, 404, `${keyName}: ${path} ${model}: status`);
        assert.equal(e.code, 'model_not_found');
        assert.equal(e.param, 'model');
        assert.equal(e.type, 'invalid_request_error');
        assert.match(e.message, new RegExp('`' + model + '`'));
        return true;
    });
}

async function syncCalls() {
    for (const m of ['gpt-4o', 'gpt-4o-mini']) await allowed('no restriction', 'chat', m);
    await allowed('no restriction', 'embeddings', 'text-embedding-3-small');
    await allowed('no restriction', 'responses', 'gpt-4o-mini');
    await allowed('no restriction', 'completions', 'gpt-4o-mini');

    await allowed('--models gpt-4o', 'chat', 'gpt-4o');
    await allowed('--models gpt-4o', 'responses', 'gpt-4o');
    for (const p of ['chat', 'responses', 'completions']) await refused('--models gpt-4o', p, 'gpt-4o-mini');
    await refused('--models gpt-4o', 'embeddings', 'text-embedding-3-small');

    await allowed('--models gpt-4o-mini', 'chat', 'gpt-4o-mini');
    await allowed('--models gpt-4o-mini', 'completions', 'gpt-4o-mini');
    for (const p of ['chat', 'responses', 'completions']) await refused('--models gpt-4o-mini', p, 'gpt-4o');

    await allowed('--models list', 'chat', 'gpt-4o-mini');
    await allowed('--models list', 'embeddings', 'text-embedding-3-small');
    await allowed('--models list', 'responses', 'gpt-4o-mini');
    await refused('--models list', 'chat', 'gpt-4o');
    await refused('--models list', 'embeddings', 'text-embedding-3-large');
    await refused('--models list', 'completions', 'gpt-4o');
}

function embeddingLine(id, model) {
    return JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/embeddings',
        body: { model, input: 'hi' } });
}

async function upload(client, lines) {
    return client.files.create({
        file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'in.jsonl'), purpose: 'batch' });
}

async function batchRuns(keyName, lines, endpoint = '/v1/chat/completions') {
    const c = keys[keyName];
    const file = await upload(c, lines);
    const b = await c.batches.create({ input_file_id: file.id, endpoint, completion_window: '24h' });
    const done = await pollBatch(c, b.id, ['completed', 'failed', 'expired', 'cancelled'], 60000);
    assert.equal(done.status, 'completed', `${keyName}: batch ${b.id}`);
    assert.equal(done.request_counts.completed, lines.length, `${keyName}: batch ${b.id}`);
}

async function batchRefused(keyName, lines, line, customId, model, endpoint = '/v1/chat/completions') {
    const c = keys[keyName];
    const file = await upload(c, lines); // accepted: the check is at batch creation
    const before = (await c.batches.list({ limit: 100 })).data.map((b) => b.id);
    await assert.rejects(c.batches.create({ input_file_id: file.id, endpoint,
        completion_window: '24h' }), (e) => {
        assert.equal(e.status, 400, `${keyName}: status`);
        assert.equal(e.code, 'model_not_found');
        assert.equal(e.param, 'input_file_id');
        assert.ok(e.message.includes(`line ${line} `), e.message);
        assert.ok(e.message.includes(`"${customId}"`), e.message);
        assert.ok(e.message.includes('`' + model + '`'), e.message);
        return true;
    });
    const after = (await c.batches.list({ limit: 100 })).data.map((b) => b.id);
    assert.deepEqual(after, before, `${keyName}: a refused batch was written`);
}

async function batches() {
    const mixed = [chatLine('a', 'gpt-4o', 'hi'), chatLine('b', 'gpt-4o-mini', 'hi')];
    const only = (m) => [chatLine('a', m, 'hi'), chatLine('b', m, 'hi')];
    await batchRuns('no restriction', mixed);
    await batchRefused('--models gpt-4o', mixed, 2, 'b', 'gpt-4o-mini');
    await batchRuns('--models gpt-4o', only('gpt-4o'));
    await batchRefused('--models gpt-4o-mini', mixed, 1, 'a', 'gpt-4o');
    await batchRuns('--models gpt-4o-mini', only('gpt-4o-mini'));
    await batchRefused('--models list', [chatLine('a', 'gpt-4o-mini', 'hi'),
        chatLine('b', 'gpt-4o', 'hi')], 2, 'b', 'gpt-4o');
    await batchRefused('--models list', [embeddingLine('e1', 'text-embedding-3-small'),
        embeddingLine('e2', 'text-embedding-3-large')], 2, 'e2', 'text-embedding-3-large',
        '/v1/embeddings');
    await batchRuns('--models list', [embeddingLine('e1', 'text-embedding-3-small')],
        '/v1/embeddings');
    await batchRuns('--models list', only('gpt-4o-mini'));
}

// A pinned user: the call and the batch line as "bob" run as alice; seen in
// the jobs' fields (job ids of sync calls are new: found by listing jobs).
async function pinnedUser() {
    const { execFileSync } = await import('node:child_process');
    const redis = (...a) => execFileSync('redis-cli', ['-p', process.env.REDIS_PORT, ...a],
        { encoding: 'utf8' }).trim();
    const prefix = `llmq:{${process.env.LLMQ_ACCOUNT}}`;
    // job ids: waiting ones as records (jr:<id>), taken ones as hashes
    // (job:<id>), ended ones as ended records (res:<id>)
    const jobs = () => new Set(['jr', 'job', 'res'].flatMap((k) =>
        redis('--scan', '--pattern', `${prefix}:${k}:*`).split('\n').filter((l) => l)
            .map((l) => l.slice(prefix.length + k.length + 2))));
    // a job's fields whatever its layout (lua/job_fields.lua)
    const fields = (id, ...names) => {
        const fn = redis('FUNCTION', 'LIST').match(/llmq_job_fields_[0-9a-f]+/)[0];
        return redis('FCALL', fn, '1', `${prefix}:`, id, ...names);
    };
    const pinned = clientFor(newKey('--tenant', 'acme', '--user', 'alice', '--priority', 'normal'));
    const before = jobs();
    await pinned.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 5, user: 'bob',
        messages: [{ role: 'user', content: 'hi' }] });
    const made = [...jobs()].filter((j) => !before.has(j));
    assert.equal(made.length, 1, `jobs made by one call: ${made}`);
    assert.equal(fields(made[0], 'tenant', 'user', 'prio'), 'acme\nalice\nnormal');
    const file = await upload(pinned, [chatLine('own', 'gpt-4o-mini', 'hi',
        { llmq: { tenant: 'other', user: 'bob', priority: 'high' } })]);
    const b = await pinned.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    assert.equal(fields(`${b.id}.own`, 'tenant', 'user', 'prio'),
        'acme\nalice\nnormal');
}

async function tenantIsolation() {
    const secret = [chatLine('ok', 'gpt-4o-mini', 'secret of acme'),
        chatLine('bad', 'gpt-unknown', 'secret of acme')];
    const file = await upload(acme, secret);
    const b = await acme.batches.create({ input_file_id: file.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await pollBatch(acme, b.id, ['completed'], 60000);
    assert.ok(done.output_file_id && done.error_file_id, 'one result in each file');
    const slowFile = await upload(acme, ['s1', 's2', 's3'].map((id) => chatLine(id, 'gpt-slow', 'x')));
    const slow = await acme.batches.create({ input_file_id: slowFile.id,
        endpoint: '/v1/chat/completions', completion_window: '24h' });
    assert.equal(slow.status, 'in_progress');
    const outsiders = { other: clientFor(newKey('--tenant', 'other')),
        untenanted: clientFor(newKey()) };
    const notFound = (what) => (e) => {
        assert.equal(e.status, 404, `${what}: status ${e.status}`);
        return true;
    };
    for (const [who, c] of Object.entries(outsiders)) {
        const ids = [file.id, done.output_file_id, done.error_file_id];
        for (const id of ids) {
            await assert.rejects(c.files.content(id), notFound(`${who}: content of ${id}`));
            await assert.rejects(c.files.retrieve(id), notFound(`${who}: ${id}`));
        }
        await assert.rejects(c.files.del(file.id), notFound(`${who}: delete`));
        await assert.rejects(c.batches.retrieve(b.id), notFound(`${who}: batch`));
        await assert.rejects(c.batches.retrieve(slow.id), notFound(`${who}: running batch`));
        await assert.rejects(c.batches.cancel(slow.id), notFound(`${who}: cancel`));
        await assert.rejects(c.batches.cancel(b.id), notFound(`${who}: cancel an ended one`));
        await assert.rejects(c.batches.create({ input_file_id: file.id,
            endpoint: '/v1/chat/completions', completion_window: '24h' }),
        notFound(`${who}: a batch from acme's file`));
        assert.equal((await c.files.list()).data.length, 0, `${who}: files listed`);
        assert.equal((await c.batches.list()).data.length, 0, `${who}: batches listed`);
    }
    assert.equal(await (await acme.files.content(file.id)).text(), secret.join('\n') + '\n');
    const still = await acme.batches.retrieve(slow.id);
    assert.equal(still.status, 'in_progress');
    assert.equal(still.cancelling_at, null);
    const cancelled = await acme.batches.cancel(slow.id);
    assert.ok(['cancelling', 'cancelled'].includes(cancelled.status), cancelled.status);
}

// models.list() and models.retrieve(): a key lists the models it may use
// (its --models; without a list, the models llmq knows: the priced ones);
// another model is a NotFoundError model_not_found.
async function modelsApi() {
    const ids = async (c) => {
        const out = [];
        for await (const m of c.models.list()) {
            assert.equal(m.object, 'model');
            assert.equal(typeof m.created, 'number');
            assert.equal(typeof m.owned_by, 'string');
            out.push(m.id);
        }
        return out.sort();
    };
    assert.deepEqual(await ids(keys['--models list']), ['gpt-4o-mini', 'text-embedding-3-small']);
    assert.deepEqual(await ids(keys['--models gpt-4o']), ['gpt-4o']);
    const all = await ids(acme);
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'text-embedding-3-small'])
        assert.ok(all.includes(m), `no restriction: ${m} not listed in ${all}`);
    const m = await keys['--models gpt-4o'].models.retrieve('gpt-4o');
    assert.deepEqual([m.id, m.object], ['gpt-4o', 'model']);
    assert.equal((await acme.models.retrieve('gpt-4o-mini')).id, 'gpt-4o-mini');
    for (const [k, id] of [['--models gpt-4o', 'gpt-4o-mini'], ['no restriction', 'no-such-model']])
        await assert.rejects(keys[k].models.retrieve(id), (e) => {
            assert.equal(e.status, 404, `${k}: ${id}`);
            assert.equal(e.code, 'model_not_found');
            assert.equal(e.param, 'model');
            return true;
        });
}

await runSteps([['every key on every sync path', syncCalls], ['the models API', modelsApi],
    ['every key on upload + batch', batches], ['a pinned user', pinnedUser],
    ['tenant isolation of content', tenantIsolation]]);
