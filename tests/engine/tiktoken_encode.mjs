#!/usr/bin/env node
// The ids the npm `tiktoken` package (o200k_base ranks plus the added tokens of
// TOKENIZER.json) gives each line of stdin, a JSON string a line, as one JSON array a line:
// an oracle for prompts the engine tokenizes itself (tests/engine/engine_cli_e2e.py).
//
//   node tests/engine/tiktoken_encode.mjs build/o200k-inkling/tokenizer.json < strings.jsonl
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

// tiktoken is installed by tools/make-tokenizer/install.sh.
const require = createRequire(new URL("../../tools/make-tokenizer/package.json", import.meta.url));
const { Tiktoken } = require("tiktoken/lite");
const o200k = require("tiktoken/encoders/o200k_base.json");

const path = process.argv[2];
if (!path) {
    console.error("usage: tiktoken_encode.mjs TOKENIZER.json < strings.jsonl");
    process.exit(2);
}
const specials = {};
for (const t of JSON.parse(readFileSync(path, "utf8")).added_tokens ?? []) specials[t.content] = t.id;
const enc = new Tiktoken(o200k.bpe_ranks, specials, o200k.pat_str);
const out = [];
for (const line of readFileSync(0, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    out.push(JSON.stringify(Array.from(enc.encode(JSON.parse(line), "all"))));
}
enc.free();
process.stdout.write(out.join("\n") + "\n");
