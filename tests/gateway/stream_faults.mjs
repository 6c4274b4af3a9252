// ctest gateway_stream_errors and gateway_stream_restart: streams that break
// off, through llmq-gateway, with the official openai npm package.
//   STREAM_CASE=errors (openai-sim --stream-error 100): the API's error
//     mid-stream reaches the client as an error event (the package throws
//     its message), and the job's result line records it;
//   STREAM_CASE=restart (one worker, --visibility-ms 3000, slow streams): a
//     worker killed mid-stream (kill -9) ends the client's stream with an
//     error event, never a silent cut, and the job is settled once a new
//     worker reclaims it (cancelled: never sent twice); a gateway stopped
//     mid-stream (SIGTERM) ends the stream with an error event, the worker
//     aborts the upstream call and settles the job.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { apiKey, clientFor, runSteps } from './sdk.mjs';
import { collect, result, simLog, waitLog } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const messages = [{ role: 'user', content: 'hi' }];

// Reads a stream until it throws; returns [chunks read, the error].
async function readUntilError(stream, onChunk) {
    let n = 0;
    try {
        await collect(stream, async (c, k) => {
            n = k;
            if (onChunk) await onChunk(c, k);
        });
    } catch (e) {
        return [n, e];
    }
    return [n, null];
}

const lastJob = async (pred) => (await waitLog((log) => log.filter((l) =>
    l.client_request_id !== '' && pred(l)))).slice(-1)[0].client_request_id;

const errorSteps = [
    ['chat: the API error mid-stream reaches the client as an error event', async () => {
        const [n, e] = await readUntilError(
            await gw.chat.completions.create({ model: MODEL, messages, stream: true }));
        assert.ok(n >= 2, `only ${n} chunks before the error`);
        assert.ok(e, 'the stream ended without an error');
        assert.match(String(e.message), /server had an error/);
        const id = await lastJob((l) => l.outcome === 'stream_error');
        const res = result(id);
        assert.equal(res.error.code, 'server_error');
        assert.equal(res.response.status_code, 200);
        assert.match(res.response.body.choices[0].message.content, /^(sim )+$/, 'partial answer kept');
    }],
    ['responses: the API error event reaches the client', async () => {
        const [n, e] = await readUntilError(
            await gw.responses.create({ model: MODEL, input: 'hi', stream: true }));
        assert.ok(n >= 4, `only ${n} events before the error`);
        assert.ok(e, 'the stream ended without an error');
        assert.match(String(e.message), /server had an error/);
    }],
];

function startWorker() {
    const p = spawn(`${process.env.LLMQ_BIN_DIR}/llmq-worker`,
        ['--base-url', process.env.SIM_URL, '--log-level', 'warn', '--consumer', 'w-new',
            '--visibility-ms', '3000'],
        { env: { ...process.env, OPENAI_API_KEY: 'gw-test-not-a-real-key' }, stdio: 'ignore' });
    return p;
}

let replacement = null;
const restartSteps = [
    ['a worker killed mid-stream: an error event, then the job is settled', async () => {
        const worker = Number(process.env.WORKER_PIDS.trim().split(/\s+/)[0]);
        const t0 = Date.now();
        const [n, e] = await readUntilError(
            await gw.chat.completions.create({ model: MODEL, messages, stream: true }),
            async (c, k) => {
                if (k === 3) process.kill(worker, 'SIGKILL');
            });
        assert.ok(e, `the stream ended silently after ${n} chunks`);
        assert.match(String(e.message), /stopped answering/);
        assert.ok(Date.now() - t0 < 30000);
        replacement = startWorker();
        const id = (await waitLog((log) => log.filter((l) => l.client_request_id !== '')))
            .slice(-1)[0].client_request_id;
        const res = result(id, 40);
        assert.equal(res.error.code, 'cancelled', JSON.stringify(res));
        await sleep(500);
        assert.equal(simLog().filter((l) => l.client_request_id === id).length, 1, 'sent twice');
    }],
    ['the gateway stopped mid-stream: an error event; upstream aborted, job settled', async () => {
        const seen = simLog().length;
        const [n, e] = await readUntilError(
            await gw.chat.completions.create({ model: MODEL, messages, stream: true }),
            async (c, k) => {
                if (k === 3) process.kill(Number(process.env.GW_PID), 'SIGTERM');
            });
        assert.ok(e, `the stream ended silently after ${n} chunks`);
        assert.match(String(e.message), /shutting down/);
        const line = (await waitLog((log) => log.slice(seen).filter((l) =>
            l.outcome === 'client_closed')))[0];
        const id = line.client_request_id;
        assert.ok(line.completion_tokens < 40, 'the upstream call ran to its end');
        const res = result(id, 20);
        assert.equal(res.error.code, 'client_closed');
    }],
    // runSteps exits the process: the worker this test started stops here
    ['the worker started here stops', async () => {
        assert.ok(replacement, 'no worker was started');
        replacement.kill('SIGTERM');
    }],
];

await runSteps(process.env.STREAM_CASE === 'restart' ? restartSteps : errorSteps);
