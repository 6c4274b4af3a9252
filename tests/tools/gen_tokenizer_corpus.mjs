// Builds the tokenizer test corpus and its reference token ids from the npm
// `tiktoken` package (the WASM build of OpenAI's tiktoken).
//
// Usage (offline, not run by CI; commit the output):
//   cd tests/tools && npm install
//   node gen_tokenizer_corpus.mjs > ../data/tokenizer/reference.tsv
//
// Output: one line per string: <input bytes as hex> TAB <o200k_base ids> TAB
// <cl100k_base ids>, ids separated by spaces. Inputs are bytes, not text, so
// that invalid UTF-8 can be tested: the reference decodes them the way
// TextDecoder does (each maximal ill-formed subpart becomes U+FFFD, a BOM is
// kept) and encodes the result with encode_ordinary (special-token text is
// ordinary text).
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { get_encoding } = require('tiktoken');

let seed = 0x1badb002;
function rnd() { // mulberry32: deterministic, so the corpus is reproducible
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const cases = []; // Uint8Array or string
const add = (x) => cases.push(x);

// Sentences in many scripts (written for this corpus).
const sentences = [
    'The quick brown fox jumps over the lazy dog.',
    "It's a truth universally acknowledged, isn't it? We'll see; they'd know, I'm sure.",
    'Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.',
    "L'été dernier, nous sommes allés à la plage près de Saint-Étienne-du-Rouvray.",
    '¿Dónde está la biblioteca? ¡Está en la esquina, señor Núñez!',
    'Съешь же ещё этих мягких французских булок, да выпей чаю.',
    'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.',
    'نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.',
    'דג סקרן שט בים מאוכזב ולפתע מצא חברה.',
    'ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।',
    'আমি বাংলায় গান গাই, আমি বাংলার গান গাই।',
    'யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம்.',
    'เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน',
    '我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！',
    'いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナとひらがな、漢字。',
    '다람쥐 헌 쳇바퀴에 타고파. 키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다.',
    'Tiếng Việt có dấu: Chào bạn, hôm nay trời đẹp quá!',
    'İstanbul\'da ılık bir sabah; IĞDIR ve ığdır, İİİ ııı.',
    'ქართული ენა ძალიან ლამაზია.',
    'Հայերենը հնդեվրոպական լեզու է։',
    'ሰላም ልዑል፣ እንዴት ነህ?',
    'Ελληνικά: Ἀρχὴ σοφίας φόβος Κυρίου. ΆΈΉΊΌΎΏ',
    'Dž dž Ǆ ǅ ǆ ǈ ǋ — titlecase digraphs; ʰʲʷ ˢᵗ modifier letters.',
    'Combining: e\u0301 a\u0308 o\u0302\u0323 ﬁ ﬂ Å Å \u1e9b\u0323',
    'Math: ∀x∈ℝ, ∃y: x²+y²≤1; ∑ᵢ aᵢ = ½·π ≈ 1.5708… ℵ₀ Ⅻ ⅞ ①②③',
    "ſ long s: Gesetz über die Maßnahmen; 'ſ, Thy'ſ.",
];

const emoji = [
    '👍', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇩🇪🇯🇵🇺🇸', '1️⃣#️⃣', '❤️', '🧑🏿‍💻', '👩‍❤️‍💋‍👨', '🫠🫨🪿',
    '😀😃😄😁', '🐈‍⬛', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '™️©️', '🤷‍♀️', '💁🏻‍♂️',
];

const code = [
    'int main(int argc, char **argv) {\n    printf("hello %s\\n", argv[0]);\n    return 0;\n}\n',
    'def f(x):\n\treturn [i ** 2 for i in range(x) if i % 3 == 0]\n\n\nprint(f(10))\r\n',
    'const x = await fetch(`/api/v1/items?id=${id}&limit=100`);\nconsole.log(x?.data ?? []);',
    '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi!"}], "n": 2}',
    '<div class="a b" id=\'x\'>&nbsp;&lt;tag&gt;</div><!-- comment -->',
    'for f in *.c; do gcc -O2 -Wall "$f" -o "${f%.c}" || exit 1; done 2>&1 | tee log',
    '^(?:[a-z0-9!#$%&\'*+/=?^_`{|}~-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$',
    'SELECT id, COUNT(*) AS n FROM users WHERE name LIKE \'%o\'\'brien%\' GROUP BY id;',
    'https://example.com/path/to/file.html?q=a%20b#frag //comment /* block */ a//b///c',
    '    if (x) {\n        y();\n    }\n\n\n    \n  \t \n',
    'fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0xFF; 16]; Ok(()) }',
    'x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&&=e||f;g??=h;i=>j;k->l;m::n;',
];

const specials = ['<|endoftext|>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>',
    '<|endofprompt|>', '<|im_start|>user<|im_sep|>', '<|endoftext|><|endoftext|>'];

for (const s of sentences) { add(s); add(' ' + s); add(s.toUpperCase()); add(s.toLowerCase()); }
for (const s of emoji) { add(s); add('a' + s + 'b'); add(' ' + s + ' '); add(s + s + s); }
for (const s of code) { add(s); add(s.replace(/ {4}/g, '\t')); }
for (const s of specials) { add(s); add('text ' + s + ' more'); add(s + '\n'); }

// Contractions in every case, after every kind of letter run.
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'ſ", "'x", "'", "''s"];
function cases_of(c) {
    const out = new Set([c, c.toUpperCase(), c.toLowerCase()]);
    if (c.length === 3) { out.add("'" + c[1].toUpperCase() + c[2]); out.add("'" + c[1] + c[2].toUpperCase()); }
    return [...out];
}
for (const c of contractions) {
    for (const v of cases_of(c)) {
        for (const w of ['don', 'DON', 'Don', 'dOn', 'ab1', '中文', 'ǅa', 'x\u0301', '', ' ', '1', 'he said', 'ÉCOLE']) {
            add(w + v); add(w + v + 'n'); add(w + v + ' x'); add(w + v + v);
        }
    }
}

// Whitespace runs.
const ws = [' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000', '\u2009', '\u0085', '\u2028',
    '\u000b', '\u000c', '\u1680', '\u202f'];
for (let i = 0; i < 160; i++) {
    let s = '';
    const n = 1 + Math.floor(rnd() * 8);
    for (let j = 0; j < n; j++) {
        s += pick(ws).repeat(1 + Math.floor(rnd() * 4));
        if (rnd() < 0.5) s += pick(['a', 'Word', '1', '!', '/', "'s", '中', '']);
    }
    add(s);
}

// Digit runs and numbers.
for (let n = 1; n <= 40; n++) {
    let d = '';
    for (let j = 0; j < n; j++) d += String(Math.floor(rnd() * 10));
    add(d); add('x' + d + 'y'); add(' ' + d + '.5');
}
add('1,234,567.89 −3.5e-10 0x1F 0b1010 3/4 ½ ²³ ١٢٣٤٥ ४५६ 一二三 Ⅷ');

// Random strings over an alphabet that mixes every class the patterns test.
const alphabet = [
    'a', 'z', 'A', 'Z', 'é', 'É', 'ß', 'ǅ', 'ʰ', 'ª', '中', 'א', 'ب', 'क', 'ि', 'ं', '\u0301', '\u0903',
    '\u20dd', '\u0488', '0', '7', '٣', '½', 'Ⅻ', '²', ' ', ' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0',
    "'", "'s", "'S", "'ll", "'RE", "'ſ", 'ſ', '.', ',', '!', '?', '/', '//', '-', '_', '(', ')', '"',
    '😀', '👍🏽', '\u200d', '\ufe0f', '\u00ad', '€', '©', '\u0000', '\u007f', '\ue000', '\ufffd',
    '\u{11f04}', '\u{11f50}', '\u{10d40}', '\u{10d50}', '\u{1e5d0}', '\u{16d40}', // Unicode 15-16
    '\u{11db0}', '\u{11de0}', '\u{16ea0}', // Unicode 17 (unassigned in 16)
    '\u0378', '\u{e0001}', '\u{10ffff}', 'ǈ', 'ᾈ', 'ῼ', 'Ω', 'K', 'Å',
];
for (let i = 0; i < 1100; i++) {
    let s = '';
    const n = 1 + Math.floor(rnd() * 24);
    for (let j = 0; j < n; j++) s += pick(alphabet);
    add(s);
}

// Invalid UTF-8 (as bytes).
const badBytes = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xff], [0xfe], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3],
    [0xef, 0xbb, 0xbf], [0xf0, 0x80, 0x80, 0x80], [0xe0, 0xa0], [0xf1, 0x80, 0x80]];
const enc8 = new TextEncoder();
for (let i = 0; i < 160; i++) {
    const parts = [];
    const n = 1 + Math.floor(rnd() * 6);
    for (let j = 0; j < n; j++) {
        if (rnd() < 0.5) parts.push(...pick(badBytes));
        else parts.push(...enc8.encode(pick(alphabet)));
    }
    add(new Uint8Array(parts));
}

// Long inputs: the heap merge, long runs of every kind.
const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
let longWord = '';
for (let i = 0; i < 3000; i++) longWord += letters[Math.floor(rnd() * letters.length)];
add(longWord);
add('a'.repeat(5000));
add(' '.repeat(3000) + 'x');
add('\n'.repeat(500) + ' '.repeat(500));
add('9'.repeat(4000));
add('中文'.repeat(1500));
add('!@#$%^&*()'.repeat(300));
add('/'.repeat(2000) + '\n\n/');
let b64 = '';
const b64c = letters + '0123456789+/';
for (let i = 0; i < 4000; i++) b64 += b64c[Math.floor(rnd() * b64c.length)];
add(b64);
add(sentences.join('\n\n').repeat(3));

const o200k = get_encoding('o200k_base');
const cl100k = get_encoding('cl100k_base');
const dec = new TextDecoder('utf-8', { ignoreBOM: true });
const lines = [];
for (const c of cases) {
    const bytes = typeof c === 'string' ? enc8.encode(c) : c;
    if (bytes.length === 0) continue;
    const text = dec.decode(bytes);
    const a = Array.from(o200k.encode_ordinary(text)).join(' ');
    const b = Array.from(cl100k.encode_ordinary(text)).join(' ');
    lines.push(Buffer.from(bytes).toString('hex') + '\t' + a + '\t' + b);
}
o200k.free();
cl100k.free();
process.stdout.write(lines.join('\n') + '\n');
process.stderr.write(`${lines.length} strings\n`);
