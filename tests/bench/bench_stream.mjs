// The client side of bench_stream.sh: N chat calls at concurrency C to URL
// (an openai-sim or an llmq-gateway), streamed or not, read with fetch and
// split into server-sent events as they arrive. Prints one JSON object:
// per call the time to the first event (ms) and every gap between events
// (ms), and how many calls failed.
//   node bench_stream.mjs URL KEY N C stream|whole
const [url, key, nArg, cArg, mode] = process.argv.slice(2);
const n = Number(nArg), c = Number(cArg), stream = mode === 'stream';

async function one(i) {
    const t0 = performance.now();
    const res = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'gpt-4o-mini', stream,
            messages: [{ role: 'user', content: `bench ${i}` }] }),
    });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    const dec = new TextDecoder();
    let buf = '', first = -1, last = -1, events = 0;
    const gaps = [];
    for await (const part of res.body) {
        buf += dec.decode(part, { stream: true });
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
            buf = buf.slice(k + 2);
            const now = performance.now();
            if (first < 0) first = now - t0;
            else gaps.push(now - last);
            last = now;
            events++;
        }
    }
    if (!stream) first = performance.now() - t0;
    return { first, gaps, events };
}

const calls = [];
let failed = 0, next = 0;
await Promise.all(Array.from({ length: c }, async () => {
    while (next < n) {
        const i = next++;
        try {
            calls.push(await one(i));
        } catch (e) {
            failed++;
            if (failed === 1) console.error(String(e));
        }
    }
}));
console.log(JSON.stringify({ failed, ttft: calls.map((x) => x.first), gaps: calls.flatMap((x) => x.gaps),
    events: calls.reduce((a, x) => a + x.events, 0) }));
