// ctest gateway_stream_load: 1,000 concurrent streamed calls through one
// llmq-gateway and two workers (openai-sim paced at 20 ms per token), each
// with the official openai npm package: every stream completes with the
// whole text. Prints the gateway's resident memory per stream in progress
// (VmRSS at the peak of in-progress streams minus before, divided by that
// peak), the figure docs/gateway.md quotes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { OpenAI, apiKey, baseURL, runSteps } from './sdk.mjs';
import { chatText, collect } from './stream_lib.mjs';

const N = Number(process.env.STREAMS || 1000);
const TOKENS = 40; // --completion-tokens 40:40

function rssKb(pid) {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
    return Number(m[1]);
}

async function inProgress() {
    const port = new URL(baseURL).port;
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(m.match(/llmq_gateway_streams_in_progress (-?\d+)/)[1]);
}

await runSteps([
    [`${N} concurrent streams through one gateway and two workers all complete`, async () => {
        const pid = Number(process.env.GW_PID);
        const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
        // warm up: the first calls load what a gateway loads once
        await collect(await client.chat.completions.create(
            { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'w' }] }));
        const before = rssKb(pid);
        let peakStreams = 0, peakRss = before, sampling = true;
        const sampler = (async () => {
            while (sampling) {
                const n = await inProgress();
                if (n > peakStreams) {
                    peakStreams = n;
                    peakRss = Math.max(peakRss, rssKb(pid));
                }
                await sleep(20);
            }
        })();
        const t0 = Date.now();
        const texts = await Promise.all(Array.from({ length: N }, async (_, i) => chatText((await collect(
            await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true,
                messages: [{ role: 'user', content: `load ${i}` }] }))).chunks)));
        const took = Date.now() - t0;
        sampling = false;
        await sampler;
        const whole = texts.filter((t) => t === 'sim '.repeat(TOKENS)).length;
        assert.equal(whole, N, `${N - whole} streams incomplete`);
        assert.equal(await inProgress(), 0);
        assert.ok(peakStreams > 0, 'no stream was seen in progress');
        const perStream = ((peakRss - before) * 1024) / peakStreams;
        console.log(`# ${N} streams in ${took} ms; at most ${peakStreams} in progress at once; ` +
            `gateway RSS ${before} kB before, ${peakRss} kB at that peak: ` +
            `${(perStream / 1024).toFixed(1)} KiB per stream in progress`);
    }],
]);
