#!/usr/bin/env node
// Builds an Inkling tokenizer.json (Hugging Face `tokenizers` format) from the o200k_base
// ranks that the npm `tiktoken` package ships, plus the 60 TMLv0 added tokens at ids
// 199998..200057 (README.md here lists them; docs/model.md, "Tokenizer").
//
//   node tools/make-tokenizer/make_tokenizer.mjs OUT.json [--merges]
//
// The vocab is written in byte-level-encoded form (GPT-2 bytes_to_unicode). By default no
// merges are written: the engine's loader then runs rank-BPE (merge the adjacent pair
// whose concatenation has the lowest id), which is exactly tiktoken's algorithm. With
// --merges the file also carries the merges list derived from the ranks (what
// transformers' TikTokenConverter does), so HF `tokenizers` can load it as well.
// The output is deterministic: the same tiktoken version gives the same bytes.
import { createRequire } from "node:module";
import { readFileSync, writeFileSync, renameSync } from "node:fs";

const require = createRequire(import.meta.url);
const o200k = require("tiktoken/encoders/o200k_base.json");
// package.json is not in tiktoken's exports map; read it from the install folder.
const tiktokenVersion = JSON.parse(
    readFileSync(new URL("./node_modules/tiktoken/package.json", import.meta.url), "utf8"),
).version;

const BASE_VOCAB = 199998; // mergeable ranks 0..199997
const FIRST_ADDED = 199998;
const LAST_ADDED = 200057; // unpadded vocab = 200058

// Named added tokens (A.3). Every other id in FIRST_ADDED..LAST_ADDED is `<|unused_N|>`,
// except 199998 which is `<|unused|>`. 200023/200024 follow the Inkling-Small
// tokenizer.json ([DS]): `<|audio|>` and `<|content_xml|>`. (vLLM's renderer reports the
// big Inkling spelling 200024 `<|unused_200024|>`; engine code resolves control tokens
// by id, so either spelling works with it.)
const NAMED = new Map([
    [199998, "<|unused|>"],
    [199999, "<|endoftext|>"],
    [200000, "<|message_user|>"],
    [200001, "<|message_model|>"],
    [200002, "<|message_system|>"],
    [200003, "<|message_tool|>"],
    [200004, "<|content_text|>"],
    [200005, "<|content_image|>"],
    [200006, "<|content_model_end_sampling|>"],
    [200008, "<|content_thinking|>"],
    [200010, "<|end_message|>"],
    [200020, "<|content_audio_input|>"],
    [200022, "<|content_tool_error|>"],
    [200023, "<|audio|>"],
    [200024, "<|content_xml|>"],
    [200028, "<|begin_of_text|>"],
    [200043, "<|audio_end|>"],
    [200049, "<|content_invoke_tool_json|>"],
    [200057, "<|content_invoke_tool_text|>"],
]);

// The o200k pre-tokenizer split, as tiktoken ships it.
const O200K_PATTERN =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?" +
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?" +
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function fail(message) {
    console.error(`make_tokenizer: ${message}`);
    process.exit(1);
}

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 onwards.
function byteToUnicodeTable() {
    const keep = [];
    for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
    for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
    for (let b = 0xae; b <= 0xff; b++) keep.push(b);
    const table = new Array(256);
    for (const b of keep) table[b] = String.fromCodePoint(b);
    let n = 0;
    for (let b = 0; b < 256; b++) {
        if (table[b] === undefined) table[b] = String.fromCodePoint(256 + n++);
    }
    return table;
}

// tiktoken's compact rank format: lines of "<first token> <first rank> <base64> <base64> …".
function parseRanks(text) {
    const tokens = [];
    for (const line of text.split("\n")) {
        if (line === "") continue;
        const parts = line.split(" ");
        const offset = Number(parts[1]);
        if (!Number.isInteger(offset)) fail(`bad rank line offset ${JSON.stringify(parts[1])}`);
        for (let i = 2; i < parts.length; i++) {
            const rank = offset + i - 2;
            if (tokens[rank] !== undefined) fail(`rank ${rank} appears twice`);
            tokens[rank] = Buffer.from(parts[i], "base64");
        }
    }
    return tokens;
}

// Merges in rank order: for each multi-byte token, run BPE on its bytes using only lower
// ranks; when that ends in exactly two parts they are the token's merge.
function deriveMerges(tokens, rankOf) {
    const merges = [];
    for (let rank = 0; rank < tokens.length; rank++) {
        const bytes = tokens[rank];
        if (bytes.length < 2) continue;
        let parts = Array.from(bytes, (b) => Buffer.from([b]));
        for (;;) {
            let best = -1;
            let bestRank = Infinity;
            for (let i = 0; i + 1 < parts.length; i++) {
                const r = rankOf.get(Buffer.concat([parts[i], parts[i + 1]]).toString("latin1"));
                if (r !== undefined && r < bestRank) {
                    bestRank = r;
                    best = i;
                }
            }
            if (best < 0 || bestRank >= rank) break;
            parts.splice(best, 2, Buffer.concat([parts[best], parts[best + 1]]));
        }
        if (parts.length === 2) merges.push([parts[0], parts[1]]);
    }
    return merges;
}

function main() {
    const args = process.argv.slice(2);
    const withMerges = args.includes("--merges");
    const positional = args.filter((a) => !a.startsWith("--"));
    const unknown = args.filter((a) => a.startsWith("--") && a !== "--merges");
    if (positional.length !== 1 || unknown.length > 0) {
        fail("usage: node make_tokenizer.mjs OUT.json [--merges]");
    }
    const out = positional[0];

    if (o200k.pat_str !== O200K_PATTERN) {
        fail(`tiktoken ${tiktokenVersion}'s o200k pattern differs from the one this tool expects`);
    }
    const tokens = parseRanks(o200k.bpe_ranks);
    if (tokens.length !== BASE_VOCAB || tokens.some((t) => t === undefined)) {
        fail(`expected ${BASE_VOCAB} contiguous o200k ranks, found ${tokens.length}`);
    }
    if (o200k.special_tokens["<|endoftext|>"] !== 199999) {
        fail("o200k_base's <|endoftext|> is not 199999");
    }

    const b2u = byteToUnicodeTable();
    const encode = (buf) => Array.from(buf, (b) => b2u[b]).join("");

    const vocab = {};
    const rankOf = new Map();
    tokens.forEach((bytes, rank) => {
        const key = encode(bytes);
        if (Object.hasOwn(vocab, key)) fail(`duplicate token bytes at rank ${rank}`);
        vocab[key] = rank;
        rankOf.set(bytes.toString("latin1"), rank);
    });

    const added = [];
    for (let id = FIRST_ADDED; id <= LAST_ADDED; id++) {
        added.push({
            id,
            content: NAMED.get(id) ?? `<|unused_${id}|>`,
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        });
    }

    const merges = withMerges
        ? deriveMerges(tokens, rankOf).map(([a, b]) => [encode(a), encode(b)])
        : [];

    const tokenizer = {
        version: "1.0",
        truncation: null,
        padding: null,
        added_tokens: added,
        normalizer: null,
        pre_tokenizer: {
            type: "Sequence",
            pretokenizers: [
                { type: "Split", pattern: { Regex: O200K_PATTERN }, behavior: "Isolated", invert: false },
                { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
            ],
        },
        post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: false },
        decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
        model: {
            type: "BPE",
            dropout: null,
            unk_token: null,
            continuing_subword_prefix: null,
            end_of_word_suffix: null,
            fuse_unk: false,
            byte_fallback: false,
            ignore_merges: true,
            vocab,
            merges,
        },
    };

    // Write next to the target, then rename: a reader never sees half a file.
    const tmp = `${out}.tmp-${process.pid}`;
    writeFileSync(tmp, JSON.stringify(tokenizer) + "\n");
    renameSync(tmp, out);
    console.error(
        `make_tokenizer: wrote ${out} (o200k_base from tiktoken ${tiktokenVersion}: ` +
            `${BASE_VOCAB} ranks, ${added.length} added tokens ${FIRST_ADDED}..${LAST_ADDED}, ` +
            `${merges.length} merges)`,
    );
}

main();
