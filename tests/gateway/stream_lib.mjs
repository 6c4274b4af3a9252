// What the streaming tests (stream.mjs, stream_faults.mjs, stream_load.mjs)
// share: a client of openai-sim itself (the direct baseline), the sim's
// access log, the bucket usage llmq reports, and reading a job's result.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { OpenAI } from './sdk.mjs';

export const direct = new OpenAI({ baseURL: process.env.SIM_URL, apiKey: 'sk-direct', maxRetries: 0 });

// The sim's access log: one object per request that ended.
export function simLog() {
    let text = '';
    try {
        text = readFileSync(process.env.SIM_LOG, 'utf8');
    } catch {
        return [];
    }
    return text.split('\n').filter((l) => l).map((l) => JSON.parse(l));
}

// Waits (at most ms) until pred(simLog()) returns something truthy (an
// array: a non-empty one); returns it.
export async function waitLog(pred, ms = 15000) {
    const end = Date.now() + ms;
    for (;;) {
        const v = pred(simLog());
        if (v && (!Array.isArray(v) || v.length > 0)) return v;
        if (Date.now() > end) throw new Error(`the sim's access log never showed it (${ms} ms)`);
        await sleep(50);
    }
}

function llmq(...args) {
    return execFileSync(`${process.env.LLMQ_BIN_DIR}/llmq`, args,
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

// The bucket of model as `llmq status --json` reports it.
export function bucket(model) {
    const s = JSON.parse(llmq('status', '--json'));
    const b = (s.buckets || []).find((x) => x.name === model);
    if (!b) throw new Error(`no bucket ${model} in llmq status`);
    return b;
}

// Jobs delivered and not yet acknowledged, over every priority.
export function inFlight() {
    const s = JSON.parse(llmq('status', '--json'));
    let n = 0;
    for (const p of Object.values(s.queues || {})) n += p.in_flight || 0;
    return n;
}

// The result line of job id (waits for it at most s seconds). `llmq results`
// exits 3 for a dead-lettered job: its line is printed all the same.
export function result(id, s = 20) {
    const p = spawnSync(`${process.env.LLMQ_BIN_DIR}/llmq`,
        ['results', id, '--wait', '--timeout', String(s)], { encoding: 'utf8' });
    if (p.status !== 0 && p.status !== 3)
        throw new Error(`llmq results ${id}: exit ${p.status}: ${p.stderr}`);
    return JSON.parse(p.stdout.trim().split('\n')[0]);
}

// Reads a stream of the openai package: its chunks and when the first came.
export async function collect(stream, onChunk) {
    const chunks = [];
    let firstAt = 0;
    for await (const c of stream) {
        if (!firstAt) firstAt = Date.now();
        chunks.push(c);
        if (onChunk) await onChunk(c, chunks.length);
    }
    return { chunks, firstAt };
}

export const chatText = (chunks) => chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
