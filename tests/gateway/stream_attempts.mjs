// ctest gateway_stream_attempts: a streamed call whose job has two attempts
// (handed back, then taken again), through llmq-gateway with the official
// openai npm package, one worker, and openai-sim allowing one request per
// period (so the worker's first attempt gets a 429 and goes back to the
// queue: frame r).
//   - the frames of the superseded attempt reach the gateway after the next
//     attempt began (as they do when another worker takes the job while the
//     first one's last frames wait for its relay tick): this test listens on
//     the gateway's relay channel and publishes the first attempt's r
//     message again once the second attempt's s came. The client still gets
//     one whole stream, and the gateway counts no error;
//   - a stream that ends in an error before its first event (its worker
//     killed while the API thinks) is a 502 and counted as an error in the
//     gateway's /metrics.
// The relay's wire format is read only as far as every release writes it:
// a sender line, then frames `<kind><seq> <job id> ... <len>\n<payload>`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { apiKey, clientFor, OpenAI, runSteps } from './sdk.mjs';
import { chatText, collect } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const TOKENS = 30; // --completion-tokens 30:30
const messages = [{ role: 'user', content: 'count for me' }];
// openai-sim keeps a window per key: this one is the worker's
const asWorker = new OpenAI({ baseURL: process.env.SIM_URL, apiKey: 'gw-test-not-a-real-key',
    maxRetries: 0 });

function redisCli(...args) {
    return execFileSync('redis-cli', ['-p', process.env.REDIS_PORT, ...args], { encoding: 'utf8' });
}

// One RESP command on a connection of its own (binary-safe arguments).
function command(args) {
    const parts = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
        const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
        parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
    }
    return Buffer.concat(parts);
}

// Reads one RESP value of buf at off: [value, next offset], or null when
// buf does not hold it whole yet.
function resp(buf, off) {
    const nl = buf.indexOf('\r\n', off);
    if (nl < 0) return null;
    const t = String.fromCharCode(buf[off]), line = buf.toString('latin1', off + 1, nl);
    if (t === '+' || t === '-' || t === ':') return [line, nl + 2];
    if (t === '$') {
        const n = Number(line);
        if (n < 0) return [null, nl + 2];
        if (buf.length < nl + 2 + n + 2) return null;
        return [buf.subarray(nl + 2, nl + 2 + n), nl + 2 + n + 2];
    }
    if (t === '*') {
        const out = [];
        let at = nl + 2;
        for (let i = 0; i < Number(line); i++) {
            const v = resp(buf, at);
            if (!v) return null;
            out.push(v[0]);
            at = v[1];
        }
        return [out, at];
    }
    throw new Error(`unexpected RESP type ${t}`);
}

// The frames of a relay message: [{kind, seq, id}].
function frames(m) {
    const out = [];
    let at = m.indexOf(10) + 1;
    while (at > 0 && at < m.length) {
        const nl = m.indexOf(10, at);
        const head = m.toString('latin1', at, nl).split(' ');
        out.push({ kind: head[0][0], seq: Number(head[0].slice(1)), id: head[1] });
        at = nl + 1 + Number(head[head.length - 1]);
    }
    return out;
}

// Every message on channel, in order of arrival: {raw, frames}.
function listen(channel) {
    const seen = [];
    const sock = connect(Number(process.env.REDIS_PORT), '127.0.0.1');
    let buf = Buffer.alloc(0);
    sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        for (let v; (v = resp(buf, 0)); buf = buf.subarray(v[1])) {
            if (Array.isArray(v[0]) && String(v[0][0]) === 'message')
                seen.push({ raw: v[0][2], frames: frames(v[0][2]) });
        }
    });
    sock.write(command(['SUBSCRIBE', channel]));
    return { seen, close: () => sock.destroy() };
}

function publish(channel, raw) {
    return new Promise((ok, fail) => {
        const sock = connect(Number(process.env.REDIS_PORT), '127.0.0.1', () =>
            sock.write(command(['PUBLISH', channel, raw])));
        sock.on('data', () => {
            sock.destroy();
            ok();
        });
        sock.on('error', fail);
    });
}

async function until(what, f, ms = 60000) {
    const end = Date.now() + ms;
    for (;;) {
        const v = f();
        if (v) return v;
        if (Date.now() > end) throw new Error(`never: ${what} (${ms} ms)`);
        await sleep(20);
    }
}

async function gwErrors() {
    const m = await (await fetch(`http://127.0.0.1:${process.env.GW_PORT}/metrics`)).text();
    return Number(m.match(/llmq_gateway_streams_total\{end="error"\} (\d+)/)[1]);
}

const earlier = new Set(); // jobs of the steps before: their frames may still come
const channel = redisCli('PUBSUB', 'CHANNELS', '*sse:*').trim().split('\n')[0];
assert.ok(channel, 'the gateway subscribes no relay channel');

await runSteps([
    ['frames of a superseded attempt that come late are dropped: one whole stream', async () => {
        const relay = listen(channel);
        try {
            await sleep(100); // subscribed
            // the period's one request: the worker's first attempt gets a 429
            await asWorker.chat.completions.create({ model: MODEL, messages, max_tokens: 1 });
            const errors = await gwErrors();
            const call = gw.chat.completions.create({ model: MODEL, messages, stream: true });
            call.catch(() => {}); // awaited below
            // the first attempt went back to the queue (r), the next one began (s)
            const back = await until('an attempt handed back', () =>
                relay.seen.findIndex((m) => m.frames.some((f) => f.kind === 'r')) + 1) - 1;
            await until('the next attempt', () => relay.seen.slice(back + 1).some((m) =>
                m.frames.some((f) => f.kind === 's')));
            for (const f of relay.seen[back].frames) earlier.add(f.id);
            await publish(channel, relay.seen[back].raw);
            const { chunks } = await collect(await call);
            assert.equal(chatText(chunks), 'sim '.repeat(TOKENS));
            assert.equal(await gwErrors(), errors, 'the gateway counted an error');
        } finally {
            relay.close();
        }
    }],
    ['a stream that fails before its first event is a 502, counted as an error', async () => {
        const relay = listen(channel);
        try {
            await sleep(100);
            const errors = await gwErrors();
            const call = gw.chat.completions.create({ model: MODEL, messages, stream: true });
            call.catch(() => {});
            // a heartbeat: the request is with the API, which thinks (--latency-ms)
            await until('a heartbeat', () => relay.seen.some((m) =>
                m.frames.some((f) => f.kind === 'h' && !earlier.has(f.id))));
            process.kill(Number(process.env.WORKER_PIDS.trim().split(/\s+/)[0]), 'SIGKILL');
            await assert.rejects(call, (e) => {
                assert.equal(e.status, 502, String(e));
                return true;
            });
            assert.equal(await gwErrors(), errors + 1, 'the errored stream is not counted');
        } finally {
            relay.close();
        }
    }],
]);
