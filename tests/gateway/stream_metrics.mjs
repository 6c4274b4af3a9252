// ctest gateway_stream_metrics: what the gateway and the worker report about
// streamed calls. One worker started here with
// --metrics-port (openai-sim: 300 ms before the first chunk, then 30
// chunks 20 ms apart), with the official openai npm package as the client.
//   - /metrics of both: streams in progress (1 while a stream runs, 0 after),
//     completed and aborted streams, the events relayed (every chunk the
//     client read, plus [DONE]), the relay messages, time to first token and
//     stream duration observed once per stream;
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { apiKey, clientFor, runSteps } from './sdk.mjs';
import { bucket, chatText, collect, inFlight, result, simLog, waitLog } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const TOKENS = 30; // --completion-tokens 30:30
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
        '--metrics-port', String(metricsPort)],
    { env: { ...process.env, OPENAI_API_KEY: 'gw-test-not-a-real-key' }, stdio: 'ignore' });
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
            assert.ok(d('stream_ttft_seconds_sum') >= 0.25, `${side}: ttft includes the 300 ms`);
        }
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
    ['the worker started here stops', async () => {
        worker.kill('SIGTERM');
    }],
]);
