"""Reading what a gateway answers: Prometheus text (GET /metrics) and SSE streams.

    m = prometheus(text)
    m[("inkling_requests_total", (("endpoint", "chat"), ("status", "200")))]   # 3.0
    m.get(("inkling_queue_depth", ()))                                          # 0.0
    for event in sse_events(raw_bytes): ...   # each `data:` payload: a dict, or "[DONE]"
"""
import json
import re

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def prometheus(text):
    """{(name, ((label, value), …)): float} of every sample line (labels sorted); comments
    skipped. A line that is neither raises ValueError naming it."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def histogram(samples, name):
    """A histogram's series from prometheus(): {"buckets": [(le, cumulative count), …] in the
    order of le (+Inf last, as float("inf")), "sum": …, "count": …}."""
    buckets = sorted((float(dict(labels)["le"]), v) for (n, labels), v in samples.items() if n == name + "_bucket")
    return {"buckets": buckets, "sum": samples.get((name + "_sum", ())), "count": samples.get((name + "_count", ()))}


def sse_events(raw):
    """The `data:` payloads of an SSE body (bytes or str, HTTP head included or not): JSON
    objects decoded, the end marker as the string "[DONE]"."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if "\r\n\r\n" in text and text.startswith("HTTP/"):
        text = text.split("\r\n\r\n", 1)[1]
    events = []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                payload = line[len("data: "):]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def histogram_moves(before, after, name, observations, walls=None):
    """What is wrong with how histogram `name` moved between two prometheus() scrapes, given
    that exactly `observations` values were observed in between; [] when nothing is. The
    buckets must stay cumulative with +Inf = count, the sum move with the count. With
    `walls` (the clients' round trips of the requests observed, one value each, measured
    around what the gateway times), the sum is at most theirs and each bucket grew by at
    least the requests whose whole round trip fits it."""
    h0, h1 = histogram(before, name), histogram(after, name)
    problems = []
    if not h1["buckets"] or h1["count"] is None or h1["sum"] is None:
        return [f"{name}: no buckets, sum or count in the scrape"]
    dcount = h1["count"] - (h0["count"] or 0)
    dsum = h1["sum"] - (h0["sum"] or 0)
    grew = [(le, v1 - v0) for (le, v1), (_, v0) in zip(h1["buckets"], h0["buckets"] or [(0, 0)] * len(h1["buckets"]))]
    cumulative = [v for _, v in h1["buckets"]]
    if dcount != observations:
        problems.append(f"count moved by {dcount}, not {observations}")
    if cumulative != sorted(cumulative):
        problems.append(f"buckets not cumulative: {h1['buckets']}")
    if h1["buckets"][-1] != (float("inf"), h1["count"]):
        problems.append(f"+Inf bucket {h1['buckets'][-1]} is not the count {h1['count']}")
    if (dsum <= 0) if dcount else (dsum != 0):
        problems.append(f"sum moved by {dsum} for {dcount} observations")
    if walls is not None:
        if dsum > sum(walls):
            problems.append(f"sum moved by {dsum:.6f} s, more than the clients' {sum(walls):.6f} s")
        short = [(le, n) for le, n in grew if n < sum(w <= le for w in walls)]
        if short:
            problems.append(f"buckets grew less than the requests that fit them: {short} (walls {walls})")
    return problems
