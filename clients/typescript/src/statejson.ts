// The command line's state forms (docs/CLI.md): `--state-json` text to CBOR
// (number kinds follow the text; keys sorted by UTF-8 bytes), the
// preferred-serialization check of `--state-cbor-hex`, and the JSON form of a
// verified state. Iterative where input nesting is unbounded.
import { concat, decodeUtf8, isWellFormed, utf8 } from './bytes.js';
import { CborError, MAX_STATE_DEPTH, encodeFloat, head, walk } from './cbor.js';

export class UsageError extends Error {}

const I64_MIN = -(1n << 63n);
const U64_MAX = (1n << 64n) - 1n;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

interface Container {
  array: boolean;
  items: Uint8Array[];
  keys: Uint8Array[];
  pendingKey?: Uint8Array;
}

/**
 * `--state-json`: the CBOR bytes, or `tooDeep` for a JSON text nested deeper
 * than 16 levels (the core then refuses it as `state_encoding`). Throws
 * UsageError for text that is not JSON, integers out of range, non-finite
 * numbers, lone surrogates and (within 16 levels) repeated keys.
 */
export function stateJsonToCbor(text: string): { cbor: Uint8Array } | { tooDeep: true } {
  const bad = (what: string): never => {
    throw new UsageError(`--state-json: ${what}`);
  };
  const notJson = () => bad('not valid JSON');
  let pos = 0;
  const ws = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      pos++;
    }
  };
  const readString = (): string => {
    const start = pos++;
    for (;;) {
      if (pos >= text.length) notJson();
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c < 0x20) notJson();
      pos += c === 0x5c ? 2 : 1;
    }
    pos++;
    let s: string;
    try {
      s = JSON.parse(text.slice(start, pos));
    } catch {
      return notJson();
    }
    if (!isWellFormed(s)) bad('a string holds a lone surrogate');
    return s;
  };
  const stack: Container[] = [];
  let maxDepth = 0;
  let duplicate = false;
  let result: Uint8Array | undefined;
  const emit = (item: Uint8Array) => {
    const top = stack[stack.length - 1];
    if (!top) result = item;
    else if (top.array) top.items.push(item);
    else {
      top.keys.push(top.pendingKey!);
      top.items.push(item);
      top.pendingKey = undefined;
    }
  };
  ws();
  for (;;) {
    // A value is expected here.
    const c = text[pos];
    if (c === '[' || c === '{') {
      pos++;
      stack.push({ array: c === '[', items: [], keys: [] });
      maxDepth = Math.max(maxDepth, stack.length);
      ws();
      if (text[pos] === (c === '[' ? ']' : '}')) {
        pos++;
        const done = stack.pop()!;
        emit(head(done.array ? 4 : 5, 0));
      } else {
        if (c === '{') {
          if (text[pos] !== '"') notJson();
          stack[stack.length - 1].pendingKey = utf8(readString());
          ws();
          if (text[pos] !== ':') notJson();
          pos++;
          ws();
        }
        continue;
      }
    } else if (c === '"') {
      const b = utf8(readString());
      emit(concat(head(3, b.length), b));
    } else if (text.startsWith('null', pos)) {
      pos += 4;
      emit(new Uint8Array([0xf6]));
    } else if (text.startsWith('true', pos)) {
      pos += 4;
      emit(new Uint8Array([0xf5]));
    } else if (text.startsWith('false', pos)) {
      pos += 5;
      emit(new Uint8Array([0xf4]));
    } else {
      NUMBER.lastIndex = pos;
      const m = NUMBER.exec(text);
      if (!m) notJson();
      pos += m![0].length;
      const literal = m![0];
      if (m![1] === undefined && m![2] === undefined) {
        const n = BigInt(literal);
        if (n < I64_MIN || n > U64_MAX) bad(`the integer ${literal} is outside -2^63..2^64-1`);
        emit(n >= 0n ? head(0, n) : head(1, -1n - n));
      } else {
        const x = Number(literal);
        if (!Number.isFinite(x)) bad(`the number ${literal} is not finite as a double`);
        emit(encodeFloat(x));
      }
    }
    // After a value: close containers or move to the next element.
    for (;;) {
      ws();
      const top = stack[stack.length - 1];
      if (!top) {
        if (pos !== text.length) notJson();
        if (maxDepth > MAX_STATE_DEPTH) return { tooDeep: true };
        if (duplicate) bad('an object repeats a key');
        return { cbor: result! };
      }
      const close = top.array ? ']' : '}';
      if (text[pos] === ',') {
        pos++;
        ws();
        if (!top.array) {
          if (text[pos] !== '"') notJson();
          top.pendingKey = utf8(readString());
          ws();
          if (text[pos] !== ':') notJson();
          pos++;
          ws();
        }
        break;
      }
      if (text[pos] !== close) notJson();
      pos++;
      stack.pop();
      if (maxDepth > MAX_STATE_DEPTH) {
        emit(new Uint8Array(0)); // refused anyway (state_encoding): do not build the bytes
      } else if (top.array) {
        emit(concat(head(4, top.items.length), ...top.items));
      } else {
        const order = top.keys.map((_, i) => i).sort((a, b) => compareBytes(top.keys[a], top.keys[b]));
        const parts: Uint8Array[] = [head(5, order.length)];
        order.forEach((i, j) => {
          if (j > 0 && compareBytes(top.keys[order[j - 1]], top.keys[i]) === 0) duplicate = true;
          parts.push(head(3, top.keys[i].length), top.keys[i], top.items[i]);
        });
        emit(concat(...parts));
      }
    }
  }
}

/** `--state-cbor-hex`: one well-formed item in preferred serialization; returns its depth. */
export function checkPreferredCbor(bytes: Uint8Array): number {
  if (bytes.length === 0) throw new UsageError('--state-cbor-hex: empty');
  let r;
  try {
    r = walk(bytes, 0, true);
  } catch (e) {
    throw new UsageError(`--state-cbor-hex: ${e instanceof CborError ? e.message : String(e)}`);
  }
  if (r.end !== bytes.length) throw new UsageError('--state-cbor-hex: bytes after the item');
  if (!onlyTheOneNaN(bytes)) throw new UsageError('--state-cbor-hex: a NaN other than f97e00 (docs/CLI.md)');
  return r.depth;
}

/**
 * Whether every half-precision NaN of a well-formed item in preferred
 * serialization (as {@link walk} checked: definite lengths only) is `f97e00`,
 * the one NaN docs/CLI.md accepts (wider NaNs are not shortest: walk refused
 * them). With definite lengths every item's head follows the previous one, so
 * one pass over the heads, skipping string contents, sees every float.
 */
function onlyTheOneNaN(bytes: Uint8Array): boolean {
  let pos = 0;
  while (pos < bytes.length) {
    const ib = bytes[pos++];
    const mt = ib >> 5;
    const ai = ib & 31;
    let n = 0;
    if (ai >= 24 && ai <= 27) {
      const size = 1 << (ai - 24);
      for (let i = 0; i < size; i++) n = n * 256 + bytes[pos + i];
      pos += size;
    } else {
      n = ai;
    }
    if (mt === 2 || mt === 3) {
      pos += n;
    } else if (mt === 7 && ai === 25 && (n & 0x7c00) === 0x7c00 && (n & 0x3ff) !== 0 && n !== 0x7e00) {
      return false;
    }
  }
  return true;
}

/** The JSON form of a state (docs/CLI.md), or undefined when it has none. */
export function stateToJson(buf: Uint8Array): string | undefined {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let pos = 0;
  const NONE = Symbol('none');
  const arg = (ai: number): bigint | undefined => {
    if (ai < 24) return BigInt(ai);
    if (ai === 31) return undefined;
    const n = 1 << (ai - 24);
    let v = 0n;
    for (let i = 0; i < n; i++) v = (v << 8n) | BigInt(buf[pos + i]);
    pos += n;
    return v;
  };
  const float = (x: number): string | typeof NONE => {
    if (!Number.isFinite(x)) return NONE;
    if (Object.is(x, -0)) return '-0.0';
    const s = String(x);
    return /[.e]/.test(s) ? s : `${s}.0`;
  };
  const str = (ai: number, mt: number): Uint8Array => {
    const n = arg(ai);
    if (n !== undefined) {
      const b = buf.subarray(pos, pos + Number(n));
      pos += Number(n);
      return b;
    }
    const chunks: Uint8Array[] = [];
    while (buf[pos] !== 0xff) {
      const cai = buf[pos++] & 31;
      chunks.push(str(cai, mt));
    }
    pos++;
    return concat(...chunks);
  };
  // Every item is read to its end even when the result is NONE, so siblings parse.
  const item = (): string | typeof NONE => {
    const ib = buf[pos++];
    const mt = ib >> 5;
    const ai = ib & 31;
    switch (mt) {
      case 0:
        return String(arg(ai));
      case 1: {
        const n = arg(ai)!;
        return n <= (1n << 63n) - 1n ? String(-1n - n) : NONE;
      }
      case 2:
        str(ai, 2);
        return NONE;
      case 3: {
        const s = decodeUtf8(str(ai, 3));
        return s === undefined ? NONE : JSON.stringify(s);
      }
      case 4: {
        const n = arg(ai);
        const out: (string | typeof NONE)[] = [];
        if (n === undefined) {
          while (buf[pos] !== 0xff) out.push(item());
          pos++;
        } else for (let i = 0n; i < n; i++) out.push(item());
        return out.includes(NONE) ? NONE : `[${out.join(',')}]`;
      }
      case 5: {
        const n = arg(ai);
        const entries: [string | typeof NONE, string | typeof NONE, boolean][] = [];
        const one = () => {
          const isText = buf[pos] >> 5 === 3;
          const k = item();
          entries.push([k, item(), isText]);
        };
        if (n === undefined) {
          while (buf[pos] !== 0xff) one();
          pos++;
        } else for (let i = 0n; i < n; i++) one();
        const seen = new Set<string>();
        for (const [k, v, isText] of entries) {
          if (k === NONE || v === NONE || !isText || seen.has(k)) return NONE;
          seen.add(k);
        }
        return `{${entries.map(([k, v]) => `${k as string}:${v as string}`).join(',')}}`;
      }
      case 6:
        arg(ai);
        item();
        return NONE;
      default:
        if (ai === 25) {
          pos += 2;
          const h = (buf[pos - 2] << 8) | buf[pos - 1];
          const e = (h >> 10) & 31;
          const m = h & 1023;
          const sign = h & 0x8000 ? -1 : 1;
          if (e === 31) return NONE;
          return float(e === 0 ? sign * m * 2 ** -24 : sign * (1 + m / 1024) * 2 ** (e - 15));
        }
        if (ai === 26) return (pos += 4), float(view.getFloat32(pos - 4));
        if (ai === 27) return (pos += 8), float(view.getFloat64(pos - 8));
        if (ai === 24) pos++;
        if (ib === 0xf4) return 'false';
        if (ib === 0xf5) return 'true';
        if (ib === 0xf6) return 'null';
        return NONE;
    }
  };
  const r = item();
  return r === NONE ? undefined : r;
}
