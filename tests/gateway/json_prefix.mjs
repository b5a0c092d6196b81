// Whether a text is the start of a JSON object: what an answer cut short by max_tokens under a
// json_object / json_schema response_format must still be (the engine's grammar kept every
// token inside the language). A character-level pushdown automaton of RFC 8259; throws at the
// first character no JSON object can have there, else says whether the object is complete.
//
//   jsonObjectPrefix('{"a": [1, tr')   → { complete: false }
//   jsonObjectPrefix('{"a": 1}')       → { complete: true }
//   jsonObjectPrefix('{"a" 1')         → throws "offset 5: ..."

const WS = ' \t\n\r';
const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

export function jsonObjectPrefix(text) {
    const stack = [];       // '{' or '[' per open container
    let state = 'root';     // root | value | value_or_end | key | key_or_end | colon | after | done
    let str = null;         // inside a string: { key, escape, hex }
    let num = null;         // a number's characters so far
    let word = null;        // a literal's remaining characters
    const fail = (i, why) => { throw new Error(`offset ${i}: ${why} (${JSON.stringify(text.slice(Math.max(0, i - 20), i + 1))})`); };
    const valueDone = () => { state = stack.length ? 'after' : 'done'; };
    const startValue = (c, i) => {
        if (c === '{') { stack.push('{'); state = 'key_or_end'; }
        else if (c === '[') { stack.push('['); state = 'value_or_end'; }
        else if (c === '"') str = { key: false, escape: false, hex: 0 };
        else if (c === '-' || (c >= '0' && c <= '9')) num = c;
        else if ('tfn'.includes(c)) word = { t: 'rue', f: 'alse', n: 'ull' }[c];
        else fail(i, 'not the start of a value');
    };
    for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (str) {
            if (str.hex > 0) { if (!/[0-9a-fA-F]/.test(c)) fail(i, 'bad \\u escape'); str.hex--; }
            else if (str.escape) { if (c === 'u') str.hex = 4; else if (!'"\\/bfnrt'.includes(c)) fail(i, 'bad escape'); str.escape = false; }
            else if (c === '\\') str.escape = true;
            else if (c === '"') { const key = str.key; str = null; if (key) state = 'colon'; else valueDone(); }
            else if (c.charCodeAt(0) < 0x20) fail(i, 'a control character in a string');
            continue;
        }
        if (word) {
            if (c !== word[0]) fail(i, 'not a literal');
            word = word.slice(1);
            if (!word) { word = null; valueDone(); }
            continue;
        }
        if (num !== null) {
            if (/[0-9+\-.eE]/.test(c)) { num += c; continue; }
            if (!NUMBER.test(num)) fail(i, `bad number ${num}`);
            num = null;
            valueDone();
        }
        if (WS.includes(c)) continue;
        switch (state) {
        case 'root': if (c !== '{') fail(i, 'the answer is not an object'); stack.push('{'); state = 'key_or_end'; break;
        case 'value': startValue(c, i); break;
        case 'value_or_end': if (c === ']') { stack.pop(); valueDone(); } else startValue(c, i); break;
        case 'key_or_end': if (c === '}') { stack.pop(); valueDone(); break; } // falls through to a key
        // eslint-disable-next-line no-fallthrough
        case 'key': if (c !== '"') fail(i, 'a key must be a string'); str = { key: true, escape: false, hex: 0 }; break;
        case 'colon': if (c !== ':') fail(i, 'expected :'); state = 'value'; break;
        case 'after': {
            const top = stack[stack.length - 1];
            if (c === ',') state = top === '{' ? 'key' : 'value';
            else if (c === (top === '{' ? '}' : ']')) { stack.pop(); valueDone(); }
            else fail(i, 'expected , or the container\'s end');
            break;
        }
        case 'done': fail(i, 'text after the object');
        }
    }
    if (num !== null && !NUMBER.test(num) && !NUMBER.test(num + '0')) fail(text.length, `bad number ${num}`);
    return { complete: state === 'done' };
}
