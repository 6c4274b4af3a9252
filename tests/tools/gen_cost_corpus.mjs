// Builds tests/data/cost/requests.jsonl: a mixed corpus of requests with the
// prompt tokens each is known to cost, for tests/bench/bench_cost.c, which
// compares llmq's two charge models with it.
//
// Usage (offline, not run by CI; commit the output):
//   cd tests/tools && npm install && node gen_cost_corpus.mjs > ../data/cost/requests.jsonl
//
// Each line: {"category", "source", "url", "body", "prompt_tokens"}.
// source "openai": prompt_tokens is what OpenAI's API reported for the request
// (the examples of OpenAI's cookbook "How to count tokens with tiktoken").
// source "formula": no API is reachable from here, so prompt_tokens is the
// cookbook's counting rule evaluated with the npm tiktoken package: an
// independent implementation of what llmq's exact model claims to compute.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
const require = createRequire(import.meta.url);
const { get_encoding } = require('tiktoken');

let seed = 20251130;
function rnd() {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const encs = { o200k_base: get_encoding('o200k_base'), cl100k_base: get_encoding('cl100k_base') };
const encOf = (model) => (/^(gpt-4o|gpt-4\.1|gpt-5|o1|o3|o4)/.test(model) ? encs.o200k_base : encs.cl100k_base);
const ntok = (enc, s) => enc.encode_ordinary(s).length;

function chatTokens(model, messages) {
    const enc = encOf(model);
    let n = 3;
    for (const m of messages) {
        n += 3;
        for (const [k, v] of Object.entries(m)) {
            n += ntok(enc, v);
            if (k === 'name') n += 1;
        }
    }
    return n;
}

function toolTokens(model, tools) {
    const enc = encOf(model);
    const w = enc === encs.o200k_base ? [7, 3, 3, -3, 3, 12] : [10, 3, 3, -3, 3, 12];
    const strip = (s) => (s.endsWith('.') ? s.slice(0, -1) : s);
    let n = 0;
    for (const t of tools) {
        const f = t.function;
        n += w[0] + ntok(enc, f.name + ':' + strip(f.description || ''));
        const props = Object.entries(f.parameters.properties || {});
        if (props.length) {
            n += w[1];
            for (const [k, p] of props) {
                n += w[2];
                if (p.enum) { n += w[3]; for (const e of p.enum) n += w[4] + ntok(enc, e); }
                n += ntok(enc, `${k}:${p.type}:${strip(p.description || '')}`);
            }
        }
    }
    return tools.length ? n + w[5] : 0;
}

// Texts.
const licence = readFileSync('/usr/share/common-licenses/GPL-3', 'utf8').replace(/\s+/g, ' ');
const english = [];
for (let i = 0; i < licence.length; i += 600) english.push(licence.slice(i, i + 600));
// Code: C headers of Debian 12 packages the project builds with (stable input).
const code = [];
for (const f of ['stdio.h', 'stdlib.h', 'string.h', 'hiredis/hiredis.h', 'hiredis/async.h',
    'jansson.h', 'ev.h', 'pcre2.h', 'cmocka.h', 'x86_64-linux-gnu/curl/curl.h']) {
    const t = readFileSync(join('/usr/include', f), 'utf8');
    for (let i = 0; i < t.length && i < 6000; i += 1500) code.push(t.slice(i, i + 1500));
}
const cjk = ['我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！请把这段话翻译成英文。',
    'いろはにほへと ちりぬるを。カタカナとひらがな、漢字を混ぜた日本語の文章です。',
    '다람쥐 헌 쳇바퀴에 타고파. 키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다.',
    '人工智能正在改变世界，各行各业都在探索新的应用场景与商业模式。'];
const multi = ['Съешь же ещё этих мягких французских булок, да выпей чаю.',
    'नमस्ते, आप कैसे हैं? मुझे हिंदी सीखना पसंद है।', 'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.',
    'مرحبا بالعالم، كيف حالك اليوم؟', 'Tiếng Việt có dấu: Chào bạn, hôm nay trời đẹp quá! 👍🏽🎉',
    'Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. 🇩🇪'];
const models = ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4', 'gpt-3.5-turbo'];
const out = [];
const push = (category, source, url, body, prompt_tokens) =>
    out.push(JSON.stringify({ category, source, url, body, prompt_tokens }));

function chat(category, texts, count) {
    for (let i = 0; i < count; i++) {
        const model = pick(models);
        const messages = [{ role: 'system', content: 'You are a helpful assistant.' }];
        const turns = 1 + Math.floor(rnd() * 4);
        for (let t = 0; t < turns; t++) {
            let content = '';
            const parts = 1 + Math.floor(rnd() * 3);
            for (let p = 0; p < parts; p++) content += pick(texts) + (rnd() < 0.5 ? '\n\n' : ' ');
            const m = { role: t % 2 ? 'assistant' : 'user', content: content.trim() };
            if (rnd() < 0.2) m.name = 'user_' + Math.floor(rnd() * 100);
            messages.push(m);
        }
        const body = { model, messages };
        const mt = pick([null, 256, 1024, 4096]);
        if (mt) body.max_tokens = mt;
        push(category, 'formula', '/v1/chat/completions', body, chatTokens(model, messages));
    }
}
chat('chat-english', english, 80);
chat('chat-code', code, 60);
chat('chat-cjk', cjk, 40);
chat('chat-multilingual', multi, 40);

// Tools: varied schemas built from one pattern.
const props = {
    location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
    unit: { type: 'string', description: 'The unit of temperature to return', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', description: 'How many days to forecast.' },
    query: { type: 'string', description: 'Search terms' },
    limit: { type: 'number', description: 'Maximum results' },
    exact: { type: 'boolean', description: 'Match the whole phrase only.' },
    lang: { type: 'string', description: 'Language', enum: ['en', 'de', 'fr', 'ja', 'zh'] },
};
const fnames = ['get_current_weather', 'get_forecast', 'search_documents', 'lookup_order', 'send_email'];
for (let i = 0; i < 40; i++) {
    const model = pick(models);
    const tools = [];
    const nf = 1 + Math.floor(rnd() * 3);
    for (let f = 0; f < nf; f++) {
        const keys = Object.keys(props).filter(() => rnd() < 0.5);
        const properties = Object.fromEntries(keys.map((k) => [k, props[k]]));
        tools.push({ type: 'function', function: { name: fnames[(i + f) % fnames.length],
            description: pick(['Get the current weather in a given location', 'Search the knowledge base.',
                'Look up an order by its id', 'Send an email to a colleague.']),
            parameters: { type: 'object', properties, required: keys.slice(0, 1) } } });
    }
    const messages = [{ role: 'system', content: 'You are a helpful assistant that can use tools.' },
        { role: 'user', content: pick(english).slice(0, 200) }];
    push('tools', 'formula', '/v1/chat/completions', { model, messages, tools },
        chatTokens(model, messages) + toolTokens(model, tools));
}

// Embeddings.
for (let i = 0; i < 40; i++) {
    const input = [];
    const n = 1 + Math.floor(rnd() * 8);
    for (let j = 0; j < n; j++) input.push(pick([...english, ...cjk, ...multi, ...code]).slice(0, 400));
    const model = pick(['text-embedding-3-small', 'text-embedding-ada-002']);
    push('embeddings', 'formula', '/v1/embeddings', { model, input },
        input.reduce((s, x) => s + ntok(encs.cl100k_base, x), 0));
}

// OpenAI's cookbook requests with the usage the API reported.
const jargon = [
    { role: 'system', content: 'You are a helpful, pattern-following assistant that translates corporate jargon into plain English.' },
    { role: 'system', name: 'example_user', content: 'New synergies will help drive top-line growth.' },
    { role: 'system', name: 'example_assistant', content: 'Things working well together will increase revenue.' },
    { role: 'system', name: 'example_user', content: "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage." },
    { role: 'system', name: 'example_assistant', content: "Let's talk later when we're less busy about how to do better." },
    { role: 'user', content: "This late pivot means we don't have time to boil the ocean for the client deliverable." },
];
for (const [model, n] of [['gpt-3.5-turbo', 129], ['gpt-4-0613', 129], ['gpt-4', 129], ['gpt-4o', 124], ['gpt-4o-mini', 124]])
    push('cookbook-api', 'openai', '/v1/chat/completions', { model, messages: jargon, max_tokens: 1 }, n);
const weather = [{ type: 'function', function: { name: 'get_current_weather', description: 'Get the current weather in a given location',
    parameters: { type: 'object', properties: { location: props.location, unit: props.unit }, required: ['location'] } } }];
const wmsgs = [{ role: 'system', content: 'You are a helpful assistant that can answer to questions about the weather.' },
    { role: 'user', content: "What's the weather like in San Francisco?" }];
for (const [model, n] of [['gpt-3.5-turbo', 105], ['gpt-4', 105], ['gpt-4o', 101], ['gpt-4o-mini', 101]])
    push('cookbook-api', 'openai', '/v1/chat/completions', { model, messages: wmsgs, tools: weather }, n);

encs.o200k_base.free();
encs.cl100k_base.free();
process.stdout.write(out.join('\n') + '\n');
process.stderr.write(`${out.length} requests\n`);
