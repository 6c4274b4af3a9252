// ctest gateway_slow_clients: clients that never finish a request head
// (slowloris: a header line every second, from 127.0.0.2) against a gateway
// with --max-connections 200 and its default --header-timeout-ms (10 s):
//   - while as many slow sockets as --max-connections are open, /healthz and
//     a keyed call (GET /v1/batches) from 127.0.0.1 are still answered (at
//     most half the connections wait for a head: beyond, the oldest waiting
//     one is closed);
//   - every slow socket is closed by the gateway (the head deadline is the
//     whole head's, not an idle timeout that each trickled line resets);
//   - a keyed request whose body trickles (a byte a second) is closed once
//     --body-timeout-ms (3 s here) has passed since its head;
//   - /metrics counts them (llmq_gateway_slow_clients_closed_total).
// Waits are bounded generously (a hang fails, no timing is asserted).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const port = Number(process.env.GW_PORT);
const SLOW = 200; // --max-connections 200
const base = `http://127.0.0.1:${port}`;

function slowSocket() {
    const s = { closed: false };
    const sock = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' }, () => {
        sock.write('GET /v1/batches HTTP/1.1\r\nHost: gw\r\n');
        s.timer = setInterval(() => sock.write('X-Slow: 1\r\n'), 1000);
    });
    const done = () => {
        s.closed = true;
        clearInterval(s.timer);
    };
    sock.on('close', done);
    sock.on('error', done);
    s.sock = sock;
    return s;
}

async function until(what, f, ms) {
    const end = Date.now() + ms;
    for (;;) {
        if (await f()) return;
        if (Date.now() > end) throw new Error(`never: ${what} (within ${ms} ms)`);
        await sleep(100);
    }
}

async function get(path, headers = {}) {
    const r = await fetch(base + path, { headers, signal: AbortSignal.timeout(20000) });
    return [r.status, await r.text()];
}

let failures = 0;
async function step(name, f) {
    try {
        await f();
        console.log(`ok - ${name}`);
    } catch (e) {
        failures++;
        console.log(`not ok - ${name}: ${e.stack || e}`);
    }
}

const slow = [];
await step('slow sockets at the connection limit: /healthz and a keyed call answered', async () => {
    for (let i = 0; i < SLOW; i++) slow.push(slowSocket());
    await sleep(500); // they connected and started their heads
    const [hs] = await get('/healthz');
    assert.equal(hs, 200);
    const [bs, body] = await get('/v1/batches', { Authorization: `Bearer ${process.env.GW_KEY}` });
    assert.equal(bs, 200, body);
});
await step('every slow socket is closed by the gateway', async () => {
    await until('all slow sockets closed', () => slow.every((s) => s.closed), 90000);
});
await step('a body that trickles is closed by the body deadline', async () => {
    const s = { closed: false };
    const sock = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' }, () => {
        sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n` +
            `Authorization: Bearer ${process.env.GW_KEY}\r\nContent-Type: application/json\r\n` +
            'Content-Length: 1000\r\n\r\n{');
        s.timer = setInterval(() => sock.write(' '), 1000);
    });
    sock.on('close', () => (s.closed = true));
    sock.on('error', () => (s.closed = true));
    try {
        await until('the slow body closed', () => s.closed, 90000);
    } finally {
        clearInterval(s.timer);
        sock.destroy();
    }
});
await step('/metrics counts the slow clients it closed', async () => {
    const [, m] = await get('/metrics');
    const v = (why) => Number((m.match(new RegExp(
        `llmq_gateway_slow_clients_closed_total\\{why="${why}"\\} (\\d+)`)) || [])[1]);
    assert.ok(v('head_timeout') + v('too_many_pending') >= SLOW, m);
    assert.equal(v('body_timeout'), 1, m);
});
for (const s of slow) s.sock.destroy();
console.log(failures === 0 ? 'all passed' : `${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
