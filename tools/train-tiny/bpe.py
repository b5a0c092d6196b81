"""A small byte-level BPE tokenizer, trained deterministically, saved as the `tokenizer.json`
the engine loads (the same structure tools/make-tokenizer writes for o200k: the o200k
pre-tokenizer regex, byte-level keys, `ignore_merges`, added tokens).

    tok = train(texts, vocab_size=4096)          # texts: strings that may contain markers
    tok.save("tokenizer.json"); tok = Tokenizer.load("tokenizer.json")
    ids = tok.encode("<|message_user|><|content_text|>hi<|end_message|>")
    text = tok.decode(ids)

Ids: 0..255 are the bytes (id = byte value), 256.. the merges in the order learned (the
merge of rank r makes token 256 + r), then the added tokens at the top of the vocabulary:
the named TMLv0 tokens (tools/make-tokenizer/README.md lists them) in their o200k order,
padded to ADDED_SLOTS with `<|unused_N|>` (N = the id).

Training: the text between added tokens is split by the o200k regex; the pieces' byte
pairs are counted (weighted by piece frequency) and the most frequent pair is merged,
ties broken by the lower (left id, right id), until the vocabulary is full. Merging
within a piece is leftmost-first, which is what applying merges by rank gives when
encoding, so `encode` reproduces the training segmentation.

Encoding (as engine/model/tokenizer.h describes its loader): added tokens are cut out
first (leftmost, then longest); each regex piece that is a whole vocab entry is taken
directly (`ignore_merges`); otherwise the adjacent pair of lowest merge rank merges first,
leftmost on ties, until no pair has a merge.

Needs python3-regex (Debian) for the \\p{..} classes of the o200k pattern.
"""

import heapq
import json
import os

import regex

# The o200k split, character for character the pattern tools/make-tokenizer writes.
O200K_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Named TMLv0 added tokens in their o200k id order (tools/make-tokenizer/README.md).
NAMED_ADDED = [
    "<|unused|>", "<|endoftext|>", "<|message_user|>", "<|message_model|>", "<|message_system|>",
    "<|message_tool|>", "<|content_text|>", "<|content_image|>", "<|content_model_end_sampling|>",
    "<|content_thinking|>", "<|end_message|>", "<|content_audio_input|>", "<|content_tool_error|>",
    "<|audio|>", "<|content_xml|>", "<|begin_of_text|>", "<|audio_end|>",
    "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>",
]
ADDED_SLOTS = 32


def bytes_to_unicode():
    """GPT-2's table: printable bytes map to themselves, the rest to U+0100 onwards."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


B2U = bytes_to_unicode()
U2B = {u: b for b, u in B2U.items()}
_SPLIT = regex.compile(O200K_PATTERN)


def byte_key(bs):
    return "".join(B2U[b] for b in bs)


def added_table(first_id):
    """[(id, content)]: the named tokens, then <|unused_N|> up to ADDED_SLOTS."""
    out = [(first_id + i, t) for i, t in enumerate(NAMED_ADDED)]
    for i in range(len(NAMED_ADDED), ADDED_SLOTS):
        out.append((first_id + i, f"<|unused_{first_id + i}|>"))
    return out


def _added_regex(contents):
    alts = sorted(contents, key=lambda s: (-len(s), s))   # longest first at one position
    return regex.compile("|".join(regex.escape(a) for a in alts))


def segments(text, added_re):
    """[(is_added, string)] in order."""
    out, at = [], 0
    for m in added_re.finditer(text):
        if m.start() > at:
            out.append((False, text[at:m.start()]))
        out.append((True, m.group()))
        at = m.end()
    if at < len(text):
        out.append((False, text[at:]))
    return out


def pieces(text):
    return [m.group() for m in _SPLIT.finditer(text)]


class Tokenizer:
    def __init__(self, merges, added):
        """merges: [(left id, right id)] in rank order; added: [(id, content)]."""
        self.merges = merges
        self.token_bytes = [bytes([b]) for b in range(256)]
        self.rank = {}
        for r, (a, b) in enumerate(merges):
            self.rank[(a, b)] = r
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self.by_bytes = {bs: i for i, bs in enumerate(self.token_bytes)}
        if len(self.by_bytes) != len(self.token_bytes):
            raise ValueError("two merges make the same bytes")
        self.added = added
        self.added_id = {c: i for i, c in added}
        self.added_re = _added_regex(self.added_id)
        self._cache = {}

    @property
    def vocab_size(self):
        return max([len(self.token_bytes) - 1] + [i for i, _ in self.added]) + 1

    def id_of(self, content):
        return self.added_id[content]

    def _bpe(self, piece):
        bs = piece.encode("utf-8")
        whole = self.by_bytes.get(bs)
        if whole is not None:                 # ignore_merges
            return [whole]
        ids = list(bs)
        while len(ids) > 1:
            best, at = None, -1
            for k in range(len(ids) - 1):
                r = self.rank.get((ids[k], ids[k + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, k
            if best is None:
                break
            ids[at:at + 2] = [256 + best]
        return ids

    def encode(self, text):
        out = []
        for is_added, s in segments(text, self.added_re):
            if is_added:
                out.append(self.added_id[s])
                continue
            for p in pieces(s):
                ids = self._cache.get(p)
                if ids is None:
                    ids = self._bpe(p)
                    if len(self._cache) < 200000:
                        self._cache[p] = ids
                out.extend(ids)
        return out

    def decode(self, ids):
        content = {i: c for i, c in self.added}
        return b"".join(content[i].encode() if i in content else self.token_bytes[i]
                        for i in ids).decode("utf-8", errors="replace")

    def to_json(self):
        vocab = {byte_key(bs): i for i, bs in enumerate(self.token_bytes)}
        merges = [[byte_key(self.token_bytes[a]), byte_key(self.token_bytes[b])] for a, b in self.merges]
        added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for i, c in self.added]
        return {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False}]},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                               "use_regex": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                      "vocab": vocab, "merges": merges},
        }

    def save(self, path):
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        j = json.load(open(path, encoding="utf-8"))
        m = j["model"]
        key_id = m["vocab"]
        merges = [(key_id[a], key_id[b]) for a, b in m["merges"]]
        for r, (a, b) in enumerate(merges):
            bs = bytes(U2B[ch] for ch in "".join(m["merges"][r]))
            if key_id.get(byte_key(bs)) != 256 + r:
                raise ValueError(f"{path}: merge {r} does not make token {256 + r}")
        added = [(t["id"], t["content"]) for t in j["added_tokens"]]
        return cls(merges, added)


def train(texts, vocab_size):
    """Learns vocab_size - 256 - ADDED_SLOTS merges over `texts` (markers are skipped)."""
    n_merges = vocab_size - 256 - ADDED_SLOTS
    if n_merges < 0:
        raise ValueError(f"vocab_size {vocab_size} < {256 + ADDED_SLOTS}")
    added_re = _added_regex(NAMED_ADDED)
    freq = {}
    for t in texts:
        for is_added, s in segments(t, added_re):
            if not is_added:
                for p in pieces(s):
                    freq[p] = freq.get(p, 0) + 1
    words = [list(p.encode("utf-8")) for p in sorted(freq)]
    counts = [freq[p] for p in sorted(freq)]
    pair_count, where = {}, {}

    changed = set()

    def add_pairs(w, sign):
        ids, c = words[w], counts[w] * sign
        for k in range(len(ids) - 1):
            pr = (ids[k], ids[k + 1])
            pair_count[pr] = pair_count.get(pr, 0) + c
            changed.add(pr)
            if sign > 0:
                where.setdefault(pr, set()).add(w)

    for w in range(len(words)):
        add_pairs(w, 1)
    changed.clear()
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -c or c == 0:
            continue                              # stale entry
        new = 256 + len(merges)
        merges.append((a, b))
        changed.clear()
        for w in sorted(where.pop((a, b), ())):
            ids = words[w]
            if not any(ids[k] == a and ids[k + 1] == b for k in range(len(ids) - 1)):
                continue
            add_pairs(w, -1)
            out, k = [], 0
            while k < len(ids):
                if k + 1 < len(ids) and ids[k] == a and ids[k + 1] == b:
                    out.append(new)
                    k += 2
                else:
                    out.append(ids[k])
                    k += 1
            words[w] = out
            add_pairs(w, 1)
        pair_count.pop((a, b), None)
        changed.discard((a, b))
        for pr in sorted(changed):
            if pair_count.get(pr, 0) > 0:
                heapq.heappush(heap, (-pair_count[pr], pr[0], pr[1]))
    if len(merges) < n_merges:
        raise ValueError(f"the corpus only supports {len(merges)} merges, {n_merges} asked")
    return Tokenizer(merges, added_table(256 + n_merges))
