// Server-sent events, read as the WHATWG HTML standard's event-stream parser reads them: the
// one parser of the web UI (app.js) and the gateway's node tests (tests/gateway/lib.mjs).
// A plain ES module with no dependencies; the gateway serves it as /sse.mjs (text/javascript,
// gateway/embed_assets.cmake). `.mjs`, so that node loads it as a module without a package.json.
//
//   import { sseEvents } from './sse.mjs';
//   for await (const { event, data } of sseEvents(response.body)) …
//
// Lines end in CRLF, LF or CR (also across reads); `field:value` loses one space after the
// colon; `data` lines join with "\n"; `event` names the event ("message" by default); a line
// starting with ':' is a comment (keep-alive); a blank line dispatches the event (one without
// data is not). At the end of the stream an event not closed by a blank line is dropped.

export class SseParser {
  constructor() {
    this.partial = '';     // the line read so far
    this.afterCr = false;  // the last read ended in CR: an LF first in the next one ends nothing
    this.data = [];
    this.event = '';
  }

  // Feeds decoded text; returns the events it completed, [{event, data}].
  push(text) {
    const events = [];
    let start = 0;
    if (this.afterCr && text.length) {
      if (text[0] === '\n') start = 1;
      this.afterCr = false;
    }
    const ends = /\r\n|\r|\n/g;
    ends.lastIndex = start;
    for (let m; (m = ends.exec(text));) {
      this.line(this.partial + text.slice(start, m.index), events);
      this.partial = '';
      start = m.index + m[0].length;
      if (m[0] === '\r' && start === text.length) this.afterCr = true;
    }
    this.partial += text.slice(start);
    return events;
  }

  line(line, events) {
    if (line === '') {
      if (this.data.length) events.push({ event: this.event || 'message', data: this.data.join('\n') });
      this.data = [];
      this.event = '';
      return;
    }
    if (line[0] === ':') return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    // `id` and `retry` serve reconnection, which these clients do not do.
  }
}

// Yields the events of a byte stream: a ReadableStream (a fetch Response's body) or any async
// iterable of byte chunks (a node:http IncomingMessage). `fatal`: invalid UTF-8 throws instead
// of becoming U+FFFD. A stream that breaks off with an error throws that error.
export async function* sseEvents(source, { fatal = false } = {}) {
  const decoder = new TextDecoder('utf-8', { fatal });
  const parser = new SseParser();
  if (typeof source.getReader === 'function') {
    const reader = source.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        yield* parser.push(decoder.decode(value, { stream: true }));
      }
    } finally {
      reader.releaseLock();
    }
  } else {
    for await (const chunk of source) yield* parser.push(decoder.decode(chunk, { stream: true }));
  }
  yield* parser.push(decoder.decode());
  // The end: an unfinished line or event stays undispatched.
}
