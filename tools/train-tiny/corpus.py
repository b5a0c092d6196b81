"""The training corpus of the demo model: Debian's `fortunes` package framed as TMLv0 chats.

    fortunes(root)          -> [(category, text)] every usable fortune, in file order
    split(items)            -> (train, heldout): a fixed ~4% slice by a hash of the text
    Conversations(train)    .epoch(rng) -> [conversation text], TMLv0 markers as text

Usable fortunes: printable ASCII, 20..400 characters, at most 8 lines; each line's runs of
spaces and tabs collapse to one space (the attribution lines "\t\t-- Author" become
"-- Author"). Skipped files: ASCII art and the untranslated collection.

A conversation is rendered exactly as protocol/tml_render.cpp renders a chat at effort 0
(the gateway's and coli's default), so what the model learns is what `coli chat` sends:

  <|message_system|><|content_text|>Thinking effort level: 0<|end_message|>
  <|message_user|><|content_text|>Tell me a fortune about cats.<|end_message|>
  <|message_model|><|content_text|>FORTUNE<|end_message|><|content_model_end_sampling|>
  [<|message_user|>... a second turn, 20% of conversations]

(one line here; no newlines between markers in the real text).
"""

import collections
import hashlib
import os
import re

FORTUNE_DIR = "/usr/share/games/fortunes"
SKIP_FILES = {"art", "ascii-art", "translate-me"}

SYSTEM = "<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>"
USER = "<|message_user|><|content_text|>"
MODEL = "<|message_model|><|content_text|>"
END = "<|end_message|>"
END_SAMPLING = "<|content_model_end_sampling|>"

# Category file -> how a user names its topic ("Tell me something about {topic}.").
CATEGORY_TOPIC = {
    "computers": "computers", "cookie": "life", "debian": "Debian", "definitions": "words",
    "disclaimer": "disclaimers", "drugs": "drugs", "education": "school", "ethnic": "people",
    "food": "food", "fortunes": "fortune", "goedel": "logic", "humorists": "humor",
    "kids": "kids", "knghtbrd": "life", "law": "the law", "linux": "Linux",
    "linuxcookie": "Linux", "literature": "books", "love": "love", "magic": "magic",
    "medicine": "medicine", "men-women": "men and women", "miscellaneous": "anything",
    "news": "the news", "paradoxum": "paradoxes", "people": "people", "perl": "Perl",
    "pets": "pets", "platitudes": "wisdom", "politics": "politics", "pratchett": "books",
    "riddles": "riddles", "science": "science", "songs-poems": "poetry", "sports": "sports",
    "startrek": "Star Trek", "tao": "the Tao", "wisdom": "wisdom", "work": "work",
    "zippy": "Zippy",
}

STOPWORDS = set("""
about above after again against also always another because been before being below between
both cannot could does doing down during each even ever every from further have having here
hers herself himself into itself just like made make many might more most much must myself
never only other ought ours ourselves over same shall should some such than that their theirs
them themselves then there these they this those through under until upon very want well were
what when where which while whom whose will with without would your yours yourself yourselves
said says someone something thing things people know nothing anything everything first
""".split())

# The first user turn; {w}: a topic word of the fortune, {c}: its category's topic.
WORD_PROMPTS = ["Tell me a fortune about {w}.", "Say something about {w}.",
                "What do you think about {w}?", "Give me a quote about {w}."]
CATEGORY_PROMPTS = ["Tell me something about {c}.", "Tell me a fortune about {c}."]
PLAIN_PROMPTS = ["Tell me a fortune.", "Tell me another one.", "Say something wise.",
                 "Tell me a joke.", "Give me a quote."]
GREETINGS = ["Hello!", "Hi!", "Hello! What can you do?", "Who are you?", "Hi there."]
GREETING_REPLY = "Hello! I am a tiny Inkling model that knows fortune cookies. Here is one:\n"


def clean(text):
    lines = [re.sub(r"[ \t]+", " ", ln).strip() for ln in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def usable(text):
    return (20 <= len(text) <= 400 and text.count("\n") < 8
            and all(c == "\n" or " " <= c <= "~" for c in text)
            and "<|" not in text)


def fortunes(root=FORTUNE_DIR):
    """[(category, text)] over the category files in name order, duplicates dropped."""
    if not os.path.isdir(root):
        raise SystemExit(f"{root} is missing: apt-get install fortunes fortunes-min")
    out, seen = [], set()
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if "." in name or name in SKIP_FILES or not os.path.isfile(path):
            continue
        raw = open(path, "rb").read().decode("utf-8", errors="replace")
        for chunk in re.split(r"\n%\n", raw):
            text = clean(chunk.strip("%"))
            if usable(text) and text not in seen:
                seen.add(text)
                out.append((name, text))
    return out


def is_heldout(text):
    return hashlib.sha256(text.encode()).digest()[0] < 10   # ~3.9%


def split(items):
    train = [x for x in items if not is_heldout(x[1])]
    held = [x for x in items if is_heldout(x[1])]
    return train, held


def words(text):
    return re.findall(r"[A-Za-z]+", text)


class Conversations:
    """Draws TMLv0 conversations from fortunes; every draw is a function of the rng."""

    def __init__(self, items, df=None):
        self.items = items
        if df is None:
            df = collections.Counter()
            for _, t in items:
                df.update({w.lower() for w in words(t)})
        self.df = df

    def topic_word(self, text, rng):
        """A content word of the fortune that recurs in the corpus (so it can generalise)."""
        cands = sorted({w.lower() for w in words(text)
                        if len(w) >= 4 and w.lower() not in STOPWORDS and 5 <= self.df[w.lower()] <= 400})
        return cands[rng.randrange(len(cands))] if cands else None

    def prompt(self, cat, text, rng):
        r = rng.random()
        if r < 0.55:
            w = self.topic_word(text, rng)
            if w:
                return WORD_PROMPTS[rng.randrange(len(WORD_PROMPTS))].format(w=w), text
        if r < 0.75:
            c = CATEGORY_TOPIC.get(cat, "life")
            return CATEGORY_PROMPTS[rng.randrange(len(CATEGORY_PROMPTS))].format(c=c), text
        if r < 0.94:
            return PLAIN_PROMPTS[rng.randrange(len(PLAIN_PROMPTS))], text
        return GREETINGS[rng.randrange(len(GREETINGS))], GREETING_REPLY + text

    @staticmethod
    def turn(user, reply):
        return USER + user + END + MODEL + reply + END + END_SAMPLING

    def render(self, turns):
        return SYSTEM + "".join(self.turn(u, r) for u, r in turns)

    def epoch(self, rng):
        """Every fortune once, in a shuffled order; 20% of conversations take two."""
        order = list(range(len(self.items)))
        rng.shuffle(order)
        out, i = [], 0
        while i < len(order):
            n = 2 if rng.random() < 0.2 and i + 1 < len(order) else 1
            turns = [self.prompt(*self.items[order[i + j]], rng) for j in range(n)]
            if n == 2 and rng.random() < 0.5:
                turns[1] = ("Tell me another one.", self.items[order[i + 1]][1])
            out.append(self.render(turns))
            i += n
        return out
