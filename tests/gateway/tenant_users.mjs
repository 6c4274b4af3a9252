// Two tenants' gateway keys, one end-user name: a user is a user of its
// tenant, so tenant B's "alice" using up her budget never makes tenant A's
// "alice" wait. With the official `openai` npm package as the client
// (maxRetries 0; tests/gateway/sdk.mjs), through tests/gateway/stack.sh,
// the gateway started with --max-wait-ms 1500 (tests/gateway.cmake) and
// llmq's limit for every user 3 requests per minute (`llmq limits set M --user '*'`, set below):
//   1. B's key as "alice": 3 calls answered, the 4th a 429 (waited past
//      --max-wait-ms: the limiter denied it for most of the minute);
//   2. then A's key as "alice": 3 calls answered (before the fix the first
//      was already a 429: B's alice had used the one bucket of every
//      "alice"), the 4th a 429;
//   3. the same over raw HTTP (fetch, no SDK): B's alice still a 429
//      (rate_limit_exceeded), tenant C's alice answered;
//   4. `llmq status --json` shows A's and B's buckets, 3 requests each.
// Exit 0 when every check passed; a failed check prints what differed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { baseURL, clientFor, newKey, runSteps } from './sdk.mjs';

const llmq = (...args) => execFileSync(`${process.env.LLMQ_BIN_DIR}/llmq`, args,
    { encoding: 'utf8' });
const MODEL = 'gpt-4o-mini';

llmq('limits', 'set', MODEL, '--rpm', '1000');
llmq('limits', 'set', MODEL, '--user', '*', '--rpm', '3', '--period-ms', '60000');
const a = clientFor(newKey('--tenant', 'tenant-a')), b = clientFor(newKey('--tenant', 'tenant-b'));
const bKey = b.apiKey, cKey = newKey('--tenant', 'tenant-c');

// One chat call as "alice" over raw HTTP (no SDK): status and parsed body.
async function rawCall(key) {
    const r = await fetch(`${baseURL}/chat/completions`, { method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, user: 'alice', max_tokens: 8,
            messages: [{ role: 'user', content: 'raw' }] }) });
    return { status: r.status, body: await r.json() };
}

// The status of one call as "alice": 200, or the error's status.
async function call(c, n) {
    try {
        const r = await c.chat.completions.create({ model: MODEL, user: 'alice', max_tokens: 8,
            messages: [{ role: 'user', content: `question ${n}` }] });
        assert.equal(r.object, 'chat.completion');
        return 200;
    } catch (e) {
        if (e.status === undefined) throw e;
        return e.status;
    }
}

async function four(c) {
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await call(c, i));
    assert.deepEqual(got, [200, 200, 200, 429], `statuses ${got.join(' ')}`);
}

await runSteps([
    ["tenant-b's alice: 3 calls answered, the 4th 429", () => four(b)],
    ["then tenant-a's alice: 3 calls answered, the 4th 429", () => four(a)],
    ["raw HTTP: tenant-b's alice still 429, tenant-c's alice answered", async () => {
        const over = await rawCall(bKey);
        assert.equal(over.status, 429, JSON.stringify(over.body));
        assert.equal(over.body.error.code, 'rate_limit_exceeded');
        const other = await rawCall(cKey);
        assert.equal(other.status, 200, JSON.stringify(other.body));
        assert.equal(other.body.object, 'chat.completion');
    }],
    ['status: one alice bucket per tenant, 3 requests each', () => {
        const status = JSON.parse(llmq('status', '--json'));
        const used = (name) => (status.buckets.find((x) => x.name === name) || {}).requests_used;
        assert.equal(used(`${MODEL}/t/tenant-a/u/alice`), 3, 'tenant-a alice bucket');
        assert.equal(used(`${MODEL}/t/tenant-b/u/alice`), 3, 'tenant-b alice bucket');
        assert.equal(used(`${MODEL}/u/alice`), undefined, 'a bucket of every alice');
    }],
]);
