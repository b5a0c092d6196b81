#!/usr/bin/env node
// Tokenizer parity: the engine's tokenizer (through build/tokenize-cli) against the npm
// `tiktoken` package (o200k_base ranks + the same added tokens) on a deterministic set of
// varied strings: identical ids, and decode(encode(s)) == s. Raw byte strings (invalid
// UTF-8), which tiktoken cannot take, are checked for the round trip only.
//
//   node tests/engine/tokenizer_parity.mjs --cli build/tokenize-cli \
//        --tokenizer build/o200k-inkling/tokenizer.json [--tokenizer OTHER.json …] [--seed N]
//
// Prints one PASS/FAIL line per (tokenizer, category), then a summary line; exits 0 only
// when everything passed. tests/engine/tokenizer_parity.sh sets up the inputs.
import { createRequire } from "node:module";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

// tiktoken is installed by tools/make-tokenizer/install.sh.
const require = createRequire(new URL("../../tools/make-tokenizer/package.json", import.meta.url));
const { Tiktoken } = require("tiktoken/lite");
const o200k = require("tiktoken/encoders/o200k_base.json");

// ---- arguments -----------------------------------------------------------------------

const args = process.argv.slice(2);
let cli = null;
let seed = 20240607;
const tokenizers = [];
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--cli") cli = args[++i];
    else if (args[i] === "--tokenizer") tokenizers.push(args[++i]);
    else if (args[i] === "--seed") seed = Number(args[++i]);
    else {
        console.error(`tokenizer_parity: unknown argument ${args[i]}`);
        process.exit(2);
    }
}
if (!cli || tokenizers.length === 0) {
    console.error("usage: tokenizer_parity.mjs --cli TOKENIZE_CLI --tokenizer TOKENIZER.json [...] [--seed N]");
    process.exit(2);
}

// ---- deterministic strings -----------------------------------------------------------

function mulberry32(a) {
    return () => {
        a = (a + 0x6d2b79f5) | 0;
        let t = Math.imul(a ^ (a >>> 15), 1 | a);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const rand = mulberry32(seed);
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (list) => list[Math.floor(rand() * list.length)];
const cp = (c) => String.fromCodePoint(c);
const range = (lo, hi) => ({ lo, hi });
function fromRanges(ranges, n) {
    let s = "";
    for (let i = 0; i < n; i++) {
        const r = pick(ranges);
        s += cp(int(r.lo, r.hi));
    }
    return s;
}

const WORDS = (
    "the quick brown fox jumps over lazy dog I you we they it is was were be been have has had " +
    "do does did can could would should will shall may might must not don't won't can't it's " +
    "I'm you're we've they'll she'd he's THE Quick BROWN McDonald iPhone eBay NASA JavaScript " +
    "tokenizer engine model inference mixture experts routing attention window cache prefix " +
    "hello world foo bar baz qux naïve café résumé coöperate façade Straße ÆØÅ œuvre"
).split(" ");
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'x", "'", "’s", "'ſ", "'K"];
const SCRIPTS = {
    latin_ext: [range(0xc0, 0x24f), range(0x1e00, 0x1eff)],
    combining: [range(0x300, 0x36f)],
    greek: [range(0x391, 0x3a9), range(0x3b1, 0x3c9), range(0x1f00, 0x1f7d)],
    cyrillic: [range(0x410, 0x44f), range(0x400, 0x40f), range(0x450, 0x45f)],
    armenian: [range(0x531, 0x556), range(0x561, 0x586)],
    hebrew: [range(0x5d0, 0x5ea), range(0x591, 0x5c7)],
    arabic: [range(0x621, 0x64a), range(0x64b, 0x652), range(0x660, 0x669)],
    devanagari: [range(0x905, 0x939), range(0x93e, 0x94d), range(0x966, 0x96f)],
    bengali: [range(0x985, 0x9b9), range(0x9be, 0x9cd)],
    tamil: [range(0xb85, 0xbb9), range(0xbbe, 0xbcd)],
    thai: [range(0xe01, 0xe3a), range(0xe40, 0xe4e)],
    georgian: [range(0x10d0, 0x10fa)],
    ethiopic: [range(0x1200, 0x1248)],
    hangul: [range(0xac00, 0xd7a3), range(0x1100, 0x1112)],
    kana: [range(0x3041, 0x3096), range(0x30a1, 0x30fa), range(0x30fc, 0x30fc)],
    han: [range(0x4e00, 0x9fa5), range(0x3400, 0x4db5)],
    fullwidth: [range(0xff01, 0xff5e)],
    math_alnum: [range(0x1d400, 0x1d6a5)],
    misc_symbols: [range(0x2190, 0x23ff), range(0x2500, 0x27bf), range(0x20a0, 0x20c0)],
    numbers: [range(0x2150, 0x2189), range(0xb2, 0xb3), range(0xb9, 0xb9), range(0xbc, 0xbe), range(0x2460, 0x24ff)],
};
const SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u2003", "\u3000", "\u2028", "\u2029", "\u000b", "\u000c", "\u200b", "\ufeff", "\u1680", "\u202f", "\u205f"];
const EMOJI = [
    "😀", "😂", "🥲", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "✨", "🔥", "🤖", "🧠",
    "1️⃣", "#️⃣", "©️", "☺", "☺️", "🫠", "🦀", "🐍", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👋🏿", "🧑🏼‍🚀",
];
const PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»‹›–—…·•§¶†‡‰′″‘’“”„‚";
const CODE = [
    "int main(int argc, char** argv) {\n    return 0;\n}\n",
    "def f(x):\n\treturn x**2 + 1  # square\n",
    "const xs = [1, 2, 3].map((x) => x * 2);\r\n",
    "{\"key\": \"value\", \"n\": 12345, \"ok\": true, \"list\": [1.5e-3, null]}",
    "<div class=\"a b\"><span>&amp;&lt;&gt;</span></div>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "https://example.com/path/to/page?q=a+b&lang=en#frag",
    "/usr/local/bin/../lib/x86_64-linux-gnu/libpcre2-8.so.0",
    "C:\\Users\\Name\\Documents\\file (1).txt",
    "if (a && b || !c) { x += y >> 2; } else { y <<= 1; }",
    "    for i in range(10):\n        print(f\"{i:>4}\")\n",
    "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "$ git commit -m \"fix: don't crash\" && make -j2 test",
    "a=1;b=2;;c===d!==e?.f??g",
    "---\ntitle: \"Doc\"\ntags: [a, b]\n---\n# Heading\n\n* item\n",
    "λx. x ≠ y ∧ ∀z ∈ ℝ: z² ≥ 0",
];
const MARKERS = [
    "<|message_user|>", "<|message_model|>", "<|message_system|>", "<|message_tool|>", "<|content_text|>",
    "<|content_thinking|>", "<|end_message|>", "<|content_model_end_sampling|>", "<|audio|>", "<|audio_end|>",
    "<|content_audio_input|>", "<|content_xml|>", "<|endoftext|>", "<|unused|>", "<|unused_200053|>",
    "<|content_invoke_tool_json|>", "<|begin_of_text|>",
];
const NEAR_MARKERS = ["<|message_user", "<|unused_99|>", "<|endofprompt|>", "<||>", "<|", "|>", "<<|end_message|>>", "<|Message_User|>"];

function words(n) {
    const out = [];
    for (let i = 0; i < n; i++) {
        let w = pick(WORDS);
        if (rand() < 0.15) w += pick(CONTRACTIONS);
        if (rand() < 0.1) w = w.toUpperCase();
        else if (rand() < 0.1) w = w[0].toUpperCase() + w.slice(1);
        out.push(w);
    }
    let s = "";
    for (const w of out) s += (s === "" ? "" : rand() < 0.9 ? " " : pick(SPACES)) + w + (rand() < 0.12 ? pick([".", ",", "!", "?", ";", ":", "...", "—", ")"]) : "");
    return s;
}
function number() {
    const digits = int(1, 14);
    let s = String(int(1, 9));
    for (let i = 1; i < digits; i++) s += String(int(0, 9));
    return s;
}
function script(name, n) {
    let s = "";
    while (s.length < n) {
        s += fromRanges(SCRIPTS[name], int(1, 8));
        if (rand() < 0.6) s += pick([" ", " ", "\n", ", ", ". ", number(), "'s "]);
    }
    return s;
}
function anyPoolChar() {
    const r = rand();
    if (r < 0.25) return pick(WORDS);
    if (r < 0.4) return pick(SPACES);
    if (r < 0.5) return pick(EMOJI);
    if (r < 0.6) return PUNCT[int(0, PUNCT.length - 1)];
    if (r < 0.7) return number();
    if (r < 0.75) return pick(CONTRACTIONS);
    return fromRanges(SCRIPTS[pick(Object.keys(SCRIPTS))], int(1, 4));
}
function mix(n) {
    let s = "";
    for (let i = 0; i < n; i++) s += anyPoolChar();
    return s;
}
// Any scalar value except surrogates, weighted towards assigned planes.
function randomScalar() {
    const r = rand();
    let c;
    if (r < 0.3) c = int(0, 0x7f);
    else if (r < 0.8) c = int(0x80, 0xffff);
    else if (r < 0.95) c = int(0x10000, 0x2ffff);
    else c = int(0x30000, 0x10ffff);
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    return cp(c);
}

const categories = [];
function category(name, count, make) {
    const strings = [];
    for (let i = 0; i < count; i++) strings.push(make(i));
    categories.push({ name, strings });
}

category("english-contractions-case", 600, () => words(int(1, 40)));
for (const name of Object.keys(SCRIPTS)) category(`script-${name}`, 60, () => script(name, int(1, 60)));
category("digits", 300, () => {
    const parts = [];
    for (let i = int(1, 6); i > 0; i--) {
        parts.push(pick([number(), number() + "." + number(), "-" + number(), number() + "," + number() + "," + number(),
            "0x" + int(0, 1e9).toString(16), "٣٤٥٦", "０１２３", "१२३४", "²³", "½¾", "Ⅻ", "v" + number(), number() + "px", "1e-" + int(1, 30)]));
    }
    return parts.join(pick(["", " ", ", ", "\n", "/", ":"]));
});
category("whitespace-runs", 400, () => {
    let s = "";
    for (let i = int(1, 8); i > 0; i--) {
        s += pick(SPACES).repeat(int(1, 20));
        if (rand() < 0.7) s += pick([pick(WORDS), number(), "!", "…", pick(EMOJI), "\u00e9"]);
    }
    return s;
});
category("crlf", 300, () => {
    const lines = [];
    for (let i = int(1, 8); i > 0; i--) lines.push(rand() < 0.2 ? "" : rand() < 0.5 ? words(int(1, 8)) : pick(CODE).trimEnd());
    return lines.join(pick(["\r\n", "\r\n\r\n", "\n", " \r\n", "\r\n  ", "\t\r\n"])) + (rand() < 0.5 ? "\r\n" : "");
});
category("emoji", 300, () => {
    let s = "";
    for (let i = int(1, 10); i > 0; i--) s += pick(EMOJI) + (rand() < 0.5 ? pick(["", " ", pick(WORDS), "!", "\n"]) : "");
    return s;
});
category("code", 500, () => {
    let s = "";
    for (let i = int(1, 3); i > 0; i--) s += pick(CODE);
    if (rand() < 0.3) s = s.replace(/\n/g, "\r\n");
    if (rand() < 0.3) s = s.replace(/ {4}/g, "\t");
    return s;
});
category("punctuation", 300, () => {
    let s = "";
    for (let i = int(1, 12); i > 0; i--) {
        const run = int(1, 6);
        for (let j = 0; j < run; j++) s += PUNCT[int(0, PUNCT.length - 1)];
        s += pick(["", " ", "\n", "/", "\r\n", pick(WORDS), number()]);
    }
    return s;
});
category("mixed", 1000, () => mix(int(1, 60)));
category("control-and-rare", 300, () => {
    let s = "";
    for (let i = int(1, 30); i > 0; i--) {
        s += pick([cp(int(0, 0x1f)), "\u007f", cp(int(0x80, 0x9f)), "\u00ad", "\ue000", "\uf8ff", "\ufffd", "\ufffe", "\uffff",
            "\u{10ffff}", "\u{1f600}", "\u{10348}", "\u{12000}", "\u0301", "\u200d", "\u2060", pick(WORDS), " "]);
    }
    return s;
});
category("random-scalars", 400, () => {
    let s = "";
    for (let i = int(1, 40); i > 0; i--) s += randomScalar();
    return s;
});
category("added-tokens-in-text", 400, () => {
    let s = "";
    for (let i = int(1, 8); i > 0; i--) {
        const r = rand();
        if (r < 0.45) s += pick(MARKERS);
        else if (r < 0.55) s += pick(NEAR_MARKERS);
        else if (r < 0.75) s += pick(SPACES).repeat(int(1, 4));
        else s += mix(int(1, 6));
    }
    return s;
});
category("long-runs", 120, (i) => {
    const n = int(200, 5000);
    switch (i % 8) {
        case 0: return pick(["a", "z", "é", "の", "한", "ab", "xyz"]).repeat(n);
        case 1: return pick([" ", "\t", "\n", "\r\n", " \n", "\u3000"]).repeat(n) + pick(["", "x", "!", "\n"]);
        case 2: return pick(["!", ".", "-", "=", "*", "#", "/", "…", "—"]).repeat(n);
        case 3: return "9".repeat(n) + " " + number().repeat(int(1, 100));
        case 4: return fromRanges([range(0x61, 0x7a)], n);          // one long unknown word
        case 5: return fromRanges(SCRIPTS.han, int(100, 2000));
        case 6: return "🙂".repeat(int(50, 1000));
        default: return mix(int(200, 1500));
    }
});
category("prose-documents", 300, () => {
    let s = "";
    for (let i = int(1, 6); i > 0; i--) {
        s += words(int(5, 60)) + pick([". ", ".\n", ".\n\n", "!\r\n", "? "]);
        if (rand() < 0.3) s += script(pick(Object.keys(SCRIPTS)), int(5, 40)) + "\n";
    }
    return s;
});

const raw = [];
{
    const r2 = mulberry32(seed ^ 0x5eed);
    for (let i = 0; i < 300; i++) {
        const n = 1 + Math.floor(r2() * 64);
        const bytes = Buffer.alloc(n);
        for (let j = 0; j < n; j++) {
            const k = r2();
            bytes[j] = k < 0.4 ? 0x80 + Math.floor(r2() * 0x80) : k < 0.7 ? 0x20 + Math.floor(r2() * 0x5f) : Math.floor(r2() * 256);
        }
        // Sometimes a marker or a truncated multi-byte character inside.
        const extra = i % 3 === 0 ? Buffer.from("<|end_message|>") : i % 3 === 1 ? Buffer.from("é").subarray(0, 1) : Buffer.from("  x");
        raw.push(Buffer.concat([bytes.subarray(0, n >> 1), extra, bytes.subarray(n >> 1)]).toString("hex"));
    }
}

// ---- reference ids ---------------------------------------------------------------------

function addedTokens(path) {
    const tok = JSON.parse(readFileSync(path, "utf8"));
    const specials = {};
    for (const t of tok.added_tokens ?? []) specials[t.content] = t.id;
    return specials;
}

function runCli(path, inputs) {
    const proc = spawnSync(cli, [path, "--roundtrip"], {
        input: inputs.join("\n") + "\n",
        maxBuffer: 1 << 30,
        encoding: "utf8",
    });
    if (proc.error) throw proc.error;
    if (proc.status !== 0) throw new Error(`${cli} exited ${proc.status}: ${proc.stderr}`);
    const lines = proc.stdout.split("\n").filter((l) => l !== "");
    if (lines.length !== inputs.length) throw new Error(`${cli} answered ${lines.length} lines for ${inputs.length} inputs`);
    return lines.map((l) => JSON.parse(l));
}

const show = (s) => JSON.stringify(s.length > 120 ? s.slice(0, 120) + "…" : s);
let total = 0;
let mismatches = 0;
let roundtripFailures = 0;
let failedGroups = 0;

for (const path of tokenizers) {
    const enc = new Tiktoken(o200k.bpe_ranks, addedTokens(path), o200k.pat_str);
    const all = categories.flatMap((c) => c.strings);
    const started = Date.now();
    const ours = runCli(path, [...all.map((s) => JSON.stringify(s)), ...raw.map((h) => JSON.stringify({ hex: h }))]);
    const seconds = (Date.now() - started) / 1000;
    let at = 0;
    for (const { name, strings } of categories) {
        const bad = [];
        let trips = 0;
        for (const s of strings) {
            const got = ours[at++];
            const want = Array.from(enc.encode(s, "all"));
            total++;
            if (!got.roundtrip) trips++;
            if (got.ids.length !== want.length || got.ids.some((id, k) => id !== want[k])) bad.push({ s, got: got.ids, want });
        }
        mismatches += bad.length;
        roundtripFailures += trips;
        if (bad.length === 0 && trips === 0) {
            console.log(`PASS parity ${name} [${path}]: ${strings.length} strings identical, round trips exact`);
        } else {
            failedGroups++;
            console.log(`FAIL parity ${name} [${path}]: ${bad.length} of ${strings.length} differ, ${trips} round-trip failures`);
            for (const b of bad.slice(0, 5)) {
                console.log(`  input ${show(b.s)}\n    ours     ${JSON.stringify(b.got.slice(0, 40))}\n    tiktoken ${JSON.stringify(b.want.slice(0, 40))}`);
            }
        }
    }
    let trips = 0;
    for (let i = 0; i < raw.length; i++) if (!ours[at++].roundtrip) trips++;
    roundtripFailures += trips;
    total += raw.length;
    if (trips === 0) console.log(`PASS round trip of raw bytes (invalid UTF-8) [${path}]: ${raw.length} strings`);
    else {
        failedGroups++;
        console.log(`FAIL round trip of raw bytes (invalid UTF-8) [${path}]: ${trips} of ${raw.length} differ`);
    }
    const bytes = all.reduce((n, s) => n + Buffer.byteLength(s), 0);
    console.error(`(${path}: ${all.length + raw.length} strings, ${bytes} bytes, tokenize-cli took ${seconds.toFixed(2)} s)`);
    enc.free();
}

console.log(
    `tokenizer parity: ${total} strings over ${tokenizers.length} tokenizer(s), ${mismatches} with different ids, ` +
        `${roundtripFailures} round-trip failures, ${failedGroups} failed groups`,
);
process.exit(failedGroups === 0 ? 0 : 1);
