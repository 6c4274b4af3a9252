// Tokenizer benchmark: llmq's C tokenizer vs the npm `tiktoken` package (the
// WASM build of OpenAI's Rust tiktoken), on the same mixed corpus, in the
// same run. Prints a table with MB/s of each and the ratio, plus the memory a
// loaded vocabulary takes.
//
// Usage (needs `npm install` in tests/tools; not run by CI):
//   cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel -j2 --target bench_tokenizer
//   node tests/bench/bench_tokenizer.mjs [build-rel/tests/bench/bench_tokenizer] [seconds]
//
// The corpus (written to $TMPDIR/llmq-bench-corpus.jsonl, one JSON string per
// document, each encoded on its own as requests are) mixes English licence
// texts, C and Lua source, and the multilingual/emoji/whitespace/code strings
// of the tokenizer test corpus: about 0.8 MB.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync, readdirSync, writeFileSync, statSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const require = createRequire(join(root, 'tests', 'tools', 'package.json'));
const { get_encoding } = require('tiktoken');

const bench = process.argv[2] || join(root, 'build', 'tests', 'bench', 'bench_tokenizer');
const seconds = Number(process.argv[3] || 3);

function chunks(text, size) {
    const out = [];
    for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
    return out;
}

function buildCorpus() {
    const docs = [];
    const licences = '/usr/share/common-licenses';
    for (const f of readdirSync(licences).sort()) {
        const p = join(licences, f);
        if (statSync(p).isFile()) docs.push(...chunks(readFileSync(p, 'utf8'), 4000));
    }
    for (const dir of ['common', 'lua', 'enqueue', 'worker']) {
        let names = [];
        try { names = readdirSync(join(root, dir)).sort(); } catch { continue; }
        for (const f of names) {
            if (!/\.(c|h|lua)$/.test(f) || f === 'unicode_tables.c') continue;
            docs.push(...chunks(readFileSync(join(root, dir, f), 'utf8'), 4000));
        }
    }
    const dec = new TextDecoder('utf-8', { ignoreBOM: true });
    const ref = readFileSync(join(root, 'tests', 'data', 'tokenizer', 'reference.tsv'), 'utf8');
    let batch = '';
    for (const line of ref.split('\n')) {
        if (!line) continue;
        batch += dec.decode(Buffer.from(line.split('\t')[0], 'hex')) + '\n';
        if (batch.length > 2000) { docs.push(batch); batch = ''; }
    }
    if (batch) docs.push(batch);
    return docs;
}

function benchNode(docs, name) {
    const rss0 = process.memoryUsage().rss;
    const t0 = performance.now();
    const enc = get_encoding(name);
    const loadMs = performance.now() - t0;
    const rss1 = process.memoryUsage().rss;
    let best = Infinity, tokens = 0, rounds = 0;
    const start = performance.now();
    while (rounds < 3 || (performance.now() - start < seconds * 1000 && rounds < 1000)) {
        const r0 = performance.now();
        tokens = 0;
        for (const d of docs) tokens += enc.encode_ordinary(d).length;
        best = Math.min(best, performance.now() - r0);
        rounds++;
    }
    enc.free();
    return { tokens, best_s: best / 1000, loadMs, rssKb: Math.round((rss1 - rss0) / 1024) };
}

function benchC(corpus, name) {
    const out = execFileSync(bench, [corpus, name, String(seconds)], { encoding: 'utf8' });
    const kv = Object.fromEntries(out.trim().split(/\s+/).map((x) => x.split('=')));
    return kv;
}

const docs = buildCorpus();
const corpus = join(tmpdir(), 'llmq-bench-corpus.jsonl');
writeFileSync(corpus, docs.map((d) => JSON.stringify(d)).join('\n') + '\n');
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);

const rows = [];
for (const name of ['o200k_base', 'cl100k_base']) {
    const js = benchNode(docs, name);
    const c = benchC(corpus, name);
    const jsMBs = bytes / js.best_s / 1e6;
    const cMBs = Number(c.mb_per_s);
    rows.push([name, cMBs.toFixed(2), jsMBs.toFixed(2), (cMBs / jsMBs).toFixed(2) + '×',
        c.tokens === String(js.tokens) ? 'yes' : `NO (${c.tokens} vs ${js.tokens})`,
        (Number(c.rss_vocab_kb) / 1024).toFixed(1), (Number(c.vocab_bytes) / 1048576).toFixed(1),
        (js.rssKb / 1024).toFixed(1), Number(c.load_ms).toFixed(0), js.loadMs.toFixed(0)]);
}
console.log(`corpus: ${docs.length} documents, ${(bytes / 1e6).toFixed(2)} MB (${corpus})`);
console.log('');
console.log('| encoding | llmq MB/s | npm tiktoken MB/s | ratio | same token count | llmq RSS of vocab (MiB) | llmq vocab tables (MiB) | tiktoken RSS of vocab (MiB) | llmq load (ms) | tiktoken load (ms) |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log('| ' + r.join(' | ') + ' |');
console.log('');
console.log('MB/s: best round over the whole corpus, bytes of UTF-8 input per second, one thread.');
console.log('RSS: resident memory added by loading the vocabulary (tiktoken: of this Node process;');
console.log('its WASM heap, once grown for o200k_base, is reused for cl100k_base, hence ~0 there).');
