// What the gateway's tests with the official `openai` npm package share
// (e2e.mjs, keys.mjs, tenant_users.mjs, offload*.mjs): loading the package, Batch input
// lines, polling a batch, new gateway keys, the llmq CLI, openai-sim's own API, and running
// named steps.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

let pkg;
try {
    pkg = await import('openai');
} catch (e) {
    console.error('the openai npm package is missing (scripts/bootstrap installs it ' +
        'into tests/gateway/node_modules): ' + e.message);
    process.exit(1);
}
export const OpenAI = pkg.default, toFile = pkg.toFile;

export const baseURL = process.env.GW_URL, apiKey = process.env.GW_KEY;
assert.ok(baseURL && apiKey, 'run through tests/gateway/stack.sh (GW_URL, GW_KEY)');

// A client of the gateway with key (no retries: every answer is seen).
export function clientFor(key) {
    return new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 120000 });
}

// A new gateway key: `llmq keys create ARGS...` (prints only the key).
export function newKey(...args) {
    return execFileSync(`${process.env.LLMQ_BIN_DIR}/llmq`, ['keys', 'create', ...args],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
}

// `llmq ARGS...` of the stack's account; its standard output.
export function llmqCli(...args) {
    return execFileSync(`${process.env.LLMQ_BIN_DIR}/llmq`, args, { encoding: 'utf8' });
}

// GET path of openai-sim's own API (SIM_URL), as the workers call it (its
// batches, files); the parsed JSON answer, asserted 200.
export async function simGet(path) {
    const r = await fetch(`${process.env.SIM_URL}${path}`,
        { headers: { authorization: 'Bearer gw-test-not-a-real-key' } });
    assert.equal(r.status, 200, `sim GET ${path}`);
    return r.json();
}

export function chatLine(id, model, text, extra = {}) {
    return JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions',
        body: { model, max_tokens: 16, messages: [{ role: 'user', content: text }] }, ...extra });
}

export async function pollBatch(client, id, until, limitMs) {
    const start = Date.now();
    for (;;) {
        const b = await client.batches.retrieve(id);
        if (until.includes(b.status)) return b;
        assert.ok(Date.now() - start < limitMs, `batch ${id} still ${b.status} after ${limitMs} ms`);
        await sleep(200);
    }
}

// Runs [name, async function] steps in order (a failed one does not stop
// the rest), prints ok/not ok for each and exits 0 when all passed.
export async function runSteps(steps) {
    let failures = 0, passes = 0;
    for (const [name, f] of steps) {
        try {
            await f();
            console.log(`ok - ${name}`);
            passes++;
        } catch (e) {
            console.log(`not ok - ${name}: ${e.stack || e}`);
            failures++;
        }
    }
    console.log(`${passes} passed, ${failures} failed`);
    process.exit(failures ? 1 : 0);
}
