// ctest gateway_stream_stall: Redis stalls for 10 s (redis-server stopped
// with SIGSTOP: its sockets stay open, it answers nothing) while streams run
// through llmq-gateway (the official openai npm package, one worker,
// openai-sim pacing each stream over 8 s, past the worker's Redis command
// timeout of 5 s). The API finishes every answer during the stall; once
// Redis answers again, every stream reaches
// its client whole (the worker held the frames Redis did not take and sent
// them again; the gateway waited, telling the stall from a dead worker),
// and every job is settled done. Before, the worker aborted the calls when
// its PUBLISHes timed out and the gateway ended the streams with "the
// worker relaying this stream stopped answering".
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { apiKey, clientFor, runSteps } from './sdk.mjs';
import { chatText, result, simLog, waitLog } from './stream_lib.mjs';

const gw = clientFor(apiKey);
const MODEL = 'gpt-4o-mini';
const TOKENS = 40; // --completion-tokens 40:40
const STREAMS = 8;
const STALL_MS = 10000;
const redisPid = Number(readFileSync(`${process.env.STACK_DIR}/redis/redis.pid`, 'utf8'));
let stopped = false;
const resume = () => {
    if (stopped) process.kill(redisPid, 'SIGCONT');
    stopped = false;
};
process.on('exit', resume); // stack.sh cannot stop a stopped server

await runSteps([
    ['a 10 s Redis stall mid-stream: every stream whose answer the API finished completes', async () => {
        const seen = simLog().length;
        const firsts = [];
        const runs = [];
        for (let i = 0; i < STREAMS; i++) {
            let first;
            firsts.push(new Promise((ok) => (first = ok)));
            runs.push((async () => {
                const stream = await gw.chat.completions.create({ model: MODEL, stream: true,
                    messages: [{ role: 'user', content: `count ${i}` }] });
                const chunks = [];
                for await (const c of stream) {
                    if (chunks.length === 0) first();
                    chunks.push(c);
                }
                return chatText(chunks);
            })());
            runs[i].catch(() => first()); // its error is asserted below
        }
        await Promise.all(firsts); // every stream has begun
        process.kill(redisPid, 'SIGSTOP');
        stopped = true;
        const t0 = Date.now();
        try {
            // the API finishes every answer while Redis is stopped
            await waitLog((log) => log.slice(seen).filter((l) => l.stream).length >= STREAMS ||
                null, 30000);
        } finally {
            await sleep(Math.max(0, STALL_MS - (Date.now() - t0)));
            resume();
        }
        const lines = simLog().slice(seen).filter((l) => l.stream);
        assert.equal(lines.filter((l) => l.status === 200 && l.completion_tokens === TOKENS).length,
            STREAMS, 'an upstream call did not run to its end: ' + JSON.stringify(lines));
        const texts = await Promise.allSettled(runs);
        for (const t of texts)
            assert.equal(t.status === 'fulfilled' ? t.value : String(t.reason), 'sim '.repeat(TOKENS));
        for (const l of lines) {
            const res = result(l.client_request_id, 60);
            assert.equal(res.error, null, JSON.stringify(res));
        }
    }],
]);
