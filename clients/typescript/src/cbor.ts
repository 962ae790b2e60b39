// CBOR (RFC 8949) as FORMAT.md §5 needs it, by hand:
// - an iterative well-formedness walker (no recursion, so hostile nesting
//   cannot exhaust the stack) that also reports the nesting depth and,
//   optionally, checks preferred serialization (the CLI's --state-cbor-hex);
// - the claims envelope, encoded and parsed strictly;
// - a small value encoder (JS value -> preferred CBOR) and decoder
//   (CBOR -> JS value) for states.
import { concat, decodeUtf8, isAscii, isWellFormed, utf8 } from './bytes.js';
import { ReqstateError } from './errors.js';

/** Nesting limit of a state item (FORMAT.md §5). */
export const MAX_STATE_DEPTH = 16;

export class CborError extends Error {}

/** A CBOR tag around a value (`new Tagged(1n, 1764460800)`). */
export class Tagged {
  constructor(
    readonly tag: number | bigint,
    readonly value: unknown,
  ) {}
}

interface Frame {
  /** 'def': definite array/map/tag; 'ia'/'im': indefinite array/map; 'is': indefinite string. */
  kind: 'def' | 'ia' | 'im' | 'is';
  remaining: number;
  count: number;
  mt: number;
}

const MIN_FOR_AI = [24, 0x100, 0x10000, 0x100000000];

export interface WalkResult {
  /** Position after the item. */
  end: number;
  /** Deepest container level (a top-level array, map or tag is level 1; 0 for a scalar). */
  depth: number;
}

/**
 * Walks one data item starting at `start`. Throws CborError when it is not
 * well-formed (RFC 8949 Appendix C), when a text string is not UTF-8, or,
 * with `preferred`, when it is not in the preferred serialization the CLI
 * requires (definite lengths, shortest heads, shortest floats, no simple
 * values but false/true/null). Never recurses.
 */
export function walk(buf: Uint8Array, start: number, preferred = false): WalkResult {
  let pos = start;
  const stack: Frame[] = [];
  let depth = 0;
  let maxDepth = 0;
  const len = buf.length;
  for (;;) {
    if (pos >= len) throw new CborError('truncated');
    const ib = buf[pos++];
    const mt = ib >> 5;
    const ai = ib & 31;
    const top = stack.length > 0 ? stack[stack.length - 1] : undefined;
    let arg = 0;
    if (ai < 24) {
      arg = ai;
    } else if (ai <= 27) {
      const n = 1 << (ai - 24);
      if (pos + n > len) throw new CborError('truncated head');
      if (n === 8) {
        const hi = ((buf[pos] << 24) | (buf[pos + 1] << 16) | (buf[pos + 2] << 8) | buf[pos + 3]) >>> 0;
        const lo = ((buf[pos + 4] << 24) | (buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]) >>> 0;
        arg = hi * 0x100000000 + lo; // inexact above 2^53, only compared against lengths and 2^32
      } else {
        for (let i = 0; i < n; i++) arg = arg * 256 + buf[pos + i];
      }
      pos += n;
      if (preferred && mt !== 7 && arg < MIN_FOR_AI[ai - 24]) throw new CborError('not the shortest head');
    } else if (ai !== 31) {
      throw new CborError('reserved additional information');
    }
    if (top !== undefined && top.kind === 'is') {
      // Inside an indefinite-length string: definite chunks of the same type, or the break.
      if (!(ib === 0xff || (mt === top.mt && ai !== 31))) throw new CborError('bad chunk in an indefinite-length string');
    }
    let completed = false;
    if (ai === 31) {
      if (mt === 7) {
        if (top === undefined || top.kind === 'def') throw new CborError('unexpected break');
        if (top.kind === 'im' && top.count % 2 !== 0) throw new CborError('odd number of items in a map');
        stack.pop();
        if (top.kind !== 'is') depth--;
        completed = true;
      } else if (mt === 0 || mt === 1 || mt === 6) {
        throw new CborError('indefinite length on a major type without one');
      } else if (preferred) {
        throw new CborError('indefinite length');
      } else if (mt === 2 || mt === 3) {
        stack.push({ kind: 'is', remaining: 0, count: 0, mt });
      } else {
        stack.push({ kind: mt === 4 ? 'ia' : 'im', remaining: 0, count: 0, mt });
        depth++;
        if (depth > maxDepth) maxDepth = depth;
      }
    } else {
      switch (mt) {
        case 0:
        case 1:
          completed = true;
          break;
        case 2:
        case 3:
          if (arg > len - pos) throw new CborError('truncated string');
          if (mt === 3 && !isAscii(buf, pos, pos + arg) && decodeUtf8(buf.subarray(pos, pos + arg)) === undefined) throw new CborError('text string is not UTF-8');
          pos += arg;
          completed = true;
          break;
        case 4:
        case 5:
        case 6: {
          const items = mt === 6 ? 1 : mt === 5 ? arg * 2 : arg;
          if (items > len - pos) throw new CborError('truncated container');
          depth++;
          if (depth > maxDepth) maxDepth = depth;
          if (items === 0) {
            depth--;
            completed = true;
          } else {
            stack.push({ kind: 'def', remaining: items, count: 0, mt });
          }
          break;
        }
        default: // 7
          if (ai === 24 && arg < 32) throw new CborError('two-byte simple value below 32');
          if (preferred) {
            if (ai < 24 || ai === 24) {
              if (ib !== 0xf4 && ib !== 0xf5 && ib !== 0xf6) throw new CborError('simple value other than false, true, null');
            } else if (!shortestFloat(buf, pos, ai)) {
              throw new CborError('float not in its shortest form');
            }
          }
          completed = true;
      }
    }
    while (completed) {
      const f = stack.length > 0 ? stack[stack.length - 1] : undefined;
      if (f === undefined) return { end: pos, depth: maxDepth };
      if (f.kind === 'def') {
        if (--f.remaining === 0) {
          stack.pop();
          depth--;
          continue;
        }
      } else {
        f.count++;
      }
      completed = false;
    }
  }
}

/** Whether the float whose bytes end at `end` (ai 25, 26 or 27) is in its shortest form. */
function shortestFloat(buf: Uint8Array, end: number, ai: number): boolean {
  if (ai === 25) return true;
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const x = ai === 26 ? view.getFloat32(end - 4) : view.getFloat64(end - 8);
  if (Number.isNaN(x)) return false;
  if (halfBits(x) !== undefined) return false;
  return ai === 26 || Math.fround(x) !== x;
}

/** The half-precision bits of x when x is exactly a half, else undefined. */
export function halfBits(x: number): number | undefined {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const abs = Math.abs(x);
  if (abs === 0) return sign;
  if (abs === Infinity) return sign | 0x7c00;
  if (abs < 2 ** -14) {
    const m = abs * 2 ** 24;
    return Number.isInteger(m) ? sign | m : undefined;
  }
  let e = Math.floor(Math.log2(abs));
  if (2 ** e > abs) e--;
  if (2 ** (e + 1) <= abs) e++;
  if (e > 15) return undefined;
  const m = (abs / 2 ** e - 1) * 1024;
  return Number.isInteger(m) ? sign | ((e + 15) << 10) | m : undefined;
}

function halfToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

// ---------------------------------------------------------------- heads

/** A head with a shortest argument (n: a non-negative integer below 2^64). */
export function head(mt: number, n: number | bigint): Uint8Array {
  if (typeof n === 'bigint' && n >= 0n && n <= 0xffffffffn) n = Number(n);
  if (typeof n === 'number' && n <= 0xffffffff) {
    if (n < 24) return new Uint8Array([(mt << 5) | n]);
    if (n < 0x100) return new Uint8Array([(mt << 5) | 24, n]);
    if (n < 0x10000) return new Uint8Array([(mt << 5) | 25, n >> 8, n & 0xff]);
    return new Uint8Array([(mt << 5) | 26, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
  }
  const big = BigInt(n);
  if (big < 24n) return new Uint8Array([(mt << 5) | Number(big)]);
  if (big < 0x100n) return new Uint8Array([(mt << 5) | 24, Number(big)]);
  if (big < 0x10000n) return new Uint8Array([(mt << 5) | 25, Number(big >> 8n), Number(big & 0xffn)]);
  const size = big < 0x100000000n ? 4 : 8;
  const out = new Uint8Array(1 + size);
  out[0] = (mt << 5) | (size === 4 ? 26 : 27);
  let v = big;
  for (let i = size; i >= 1; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

function readUintShortest(buf: Uint8Array, pos: number, mt: number): [bigint, number] {
  if (pos >= buf.length) throw new CborError('truncated');
  const ib = buf[pos];
  if (ib >> 5 !== mt) throw new CborError('unexpected major type');
  const ai = ib & 31;
  if (ai < 24) return [BigInt(ai), pos + 1];
  if (ai > 27) throw new CborError('not a definite head');
  const n = 1 << (ai - 24);
  if (pos + 1 + n > buf.length) throw new CborError('truncated head');
  let v = 0n;
  for (let i = 0; i < n; i++) v = (v << 8n) | BigInt(buf[pos + 1 + i]);
  if (v < BigInt(MIN_FOR_AI[ai - 24])) throw new CborError('not the shortest head');
  return [v, pos + 1 + n];
}

// ---------------------------------------------------------------- the envelope

export interface RawClaims {
  issuedAt: bigint;
  lifetime: bigint;
  step: string;
  /** The state item's bytes as carried. */
  state: Uint8Array;
}

/** `A4 01 <uint> 02 <uint> 03 <text> 04 <item>` (FORMAT.md §5), in one allocation. */
export function encodeClaims(issuedAt: bigint, lifetime: bigint, step: Uint8Array, state: Uint8Array): Uint8Array {
  const w = new Writer(16 + step.length + state.length);
  w.byte(0xa4);
  w.byte(0x01);
  w.head(0, issuedAt);
  w.byte(0x02);
  w.head(0, lifetime);
  w.byte(0x03);
  w.head(3, step.length);
  w.bytes(step);
  w.byte(0x04);
  w.bytes(state);
  return w.finish();
}

/** Parses the claims envelope strictly. Throws CborError. */
export function parseClaims(body: Uint8Array): RawClaims {
  if (body.length < 2 || body[0] !== 0xa4 || body[1] !== 0x01) throw new CborError('not a map of four entries starting with key 1');
  const [issuedAt, p1] = readUintShortest(body, 2, 0);
  if (body[p1] !== 0x02) throw new CborError('key 2 expected');
  const [lifetime, p2] = readUintShortest(body, p1 + 1, 0);
  if (body[p2] !== 0x03) throw new CborError('key 3 expected');
  const [stepLen, p3] = readUintShortest(body, p2 + 1, 3);
  if (stepLen < 1n || stepLen > 256n || p3 + Number(stepLen) > body.length) throw new CborError('step length');
  const stepEnd = p3 + Number(stepLen);
  const step = decodeUtf8(body.subarray(p3, stepEnd));
  if (step === undefined) throw new CborError('step is not UTF-8');
  if (body[stepEnd] !== 0x04) throw new CborError('key 4 expected');
  const stateStart = stepEnd + 1;
  const { end, depth } = walk(body, stateStart);
  if (depth > MAX_STATE_DEPTH) throw new CborError('state nested deeper than 16 levels');
  if (end !== body.length) throw new CborError('bytes after the state item');
  return { issuedAt, lifetime, step, state: body.subarray(stateStart, end) };
}

/** Checks that `bytes` are exactly one well-formed item nested at most 16 levels. */
export function checkStateBytes(bytes: Uint8Array): void {
  let r: WalkResult;
  try {
    r = walk(bytes, 0);
  } catch (e) {
    throw new ReqstateError('state_encoding', `the state is not one well-formed CBOR item (${(e as Error).message})`);
  }
  if (r.end !== bytes.length) throw new ReqstateError('state_encoding', 'bytes after the state item');
  if (r.depth > MAX_STATE_DEPTH) throw new ReqstateError('state_encoding', 'state nested deeper than 16 levels');
}

// ---------------------------------------------------------------- values

const U64_MAX = (1n << 64n) - 1n;

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** The shortest float encoding that holds x exactly. */
export function encodeFloat(x: number): Uint8Array {
  const h = halfBits(x);
  if (h !== undefined) return new Uint8Array([0xf9, h >> 8, h & 0xff]);
  if (Math.fround(x) === x) {
    const out = new Uint8Array(5);
    out[0] = 0xfa;
    new DataView(out.buffer).setFloat32(1, x);
    return out;
  }
  const out = new Uint8Array(9);
  out[0] = 0xfb;
  new DataView(out.buffer).setFloat64(1, x);
  return out;
}

function encodeInt(n: bigint): Uint8Array {
  if (n >= 0n) {
    if (n > U64_MAX) throw new ReqstateError('state_encoding', 'integer out of the CBOR range');
    return head(0, n);
  }
  const m = -1n - n;
  if (m > U64_MAX) throw new ReqstateError('state_encoding', 'integer out of the CBOR range');
  return head(1, m);
}

/**
 * Encodes a JS value as one CBOR item in preferred serialization:
 * null, undefined, booleans; numbers (integral ones below 1e21 in magnitude
 * as the integer their JSON.stringify digits write, within -2^63..2^64-1:
 * exactly what `--state-json` makes of JSON.stringify's text; others as the
 * shortest float holding them); bigints; strings; Uint8Array (byte
 * strings); arrays; Map (keys and order as given); plain objects (text keys
 * sorted by their UTF-8 bytes, as `--state-json`); {@link Tagged}.
 * Throws `state_encoding` for anything else or nesting deeper than 16.
 */
export function encodeValue(value: unknown): Uint8Array {
  const w = new Writer(64);
  encodeInto(w, value, 0);
  return w.finish();
}

function encodeInto(w: Writer, v: unknown, depth: number): void {
  if (v === null) w.byte(0xf6);
  else if (v === undefined) w.byte(0xf7);
  else if (v === true) w.byte(0xf5);
  else if (v === false) w.byte(0xf4);
  else if (typeof v === 'number') {
    // Integral numbers that JSON.stringify prints without an exponent are
    // integers (as `--state-json` of that text); others are floats.
    // The integer is the one those digits write (for |v| >= 2^53 the
    // shortest digits, not the double's exact binary value).
    if (Number.isSafeInteger(v)) {
      if (v >= 0) w.head(0, v);
      else w.head(1, -1 - v);
    } else {
      const int = Number.isInteger(v) && Math.abs(v) < 1e21 ? BigInt(String(v)) : undefined;
      w.bytes(int !== undefined && int >= -(1n << 63n) && int <= U64_MAX ? encodeInt(int) : encodeFloat(v));
    }
  } else if (typeof v === 'bigint') w.bytes(encodeInt(v));
  else if (typeof v === 'string') {
    if (!isWellFormed(v)) throw new ReqstateError('state_encoding', 'a string holds a lone surrogate');
    w.text(v);
  } else if (v instanceof Uint8Array) {
    w.head(2, v.length);
    w.bytes(v);
  } else {
    if (depth >= MAX_STATE_DEPTH) throw new ReqstateError('state_encoding', 'state nested deeper than 16 levels');
    if (Array.isArray(v)) {
      w.head(4, v.length);
      for (const x of v) encodeInto(w, x, depth + 1);
    } else if (v instanceof Map) {
      w.head(5, v.size);
      for (const [k, x] of v) {
        encodeInto(w, k, depth + 1);
        encodeInto(w, x, depth + 1);
      }
    } else if (v instanceof Tagged) {
      const t = BigInt(v.tag);
      if (t < 0n || t > U64_MAX) throw new ReqstateError('state_encoding', 'tag out of range');
      w.head(6, t);
      encodeInto(w, v.value, depth + 1);
    } else if (typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
      const keyed: [Uint8Array, unknown][] = [];
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        const x = (v as Record<string, unknown>)[k];
        if (x === undefined) continue;
        if (!isWellFormed(k)) throw new ReqstateError('state_encoding', 'a key holds a lone surrogate');
        keyed.push([utf8(k), x]);
      }
      keyed.sort((a, b) => compareBytes(a[0], b[0]));
      w.head(5, keyed.length);
      for (const [k, x] of keyed) {
        w.head(3, k.length);
        w.bytes(k);
        encodeInto(w, x, depth + 1);
      }
    } else {
      throw new ReqstateError('state_encoding', `cannot encode a ${typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v}`);
    }
  }
}

/** A growing output buffer for the encoders (one allocation for most items). */
class Writer {
  private buf: Uint8Array;
  private n = 0;
  constructor(capacity: number) {
    this.buf = new Uint8Array(capacity);
  }
  private room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.n + k));
    next.set(this.buf.subarray(0, this.n));
    this.buf = next;
  }
  byte(b: number): void {
    this.room(1);
    this.buf[this.n++] = b;
  }
  bytes(b: Uint8Array): void {
    const k = b.length;
    this.room(k);
    const buf = this.buf;
    let o = this.n;
    if (k < 32) for (let i = 0; i < k; i++) buf[o++] = b[i];
    else buf.set(b, o);
    this.n += k;
  }
  /** A text string item: head and UTF-8 (ASCII written directly). */
  text(s: string): void {
    const k = s.length;
    if (k < 24) {
      this.room(1 + k);
      const buf = this.buf;
      const start = this.n;
      buf[start] = 0x60 | k;
      let i = 0;
      for (; i < k; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[start + 1 + i] = c;
      }
      if (i === k) {
        this.n = start + 1 + k;
        return;
      }
    }
    const b = utf8(s);
    this.head(3, b.length);
    this.bytes(b);
  }
  /** A head with its shortest argument (n below 2^64). */
  head(mt: number, n: number | bigint): void {
    if (typeof n === 'number' && n < 24) {
      this.byte((mt << 5) | n);
      return;
    }
    this.bytes(head(mt, n));
  }
  finish(): Uint8Array {
    return this.buf.slice(0, this.n);
  }
}

/**
 * Decodes a well-formed CBOR item (checked by {@link walk} first) into a JS
 * value: integers as numbers when the number prints as the integer (else
 * bigint), floats as numbers, text,
 * byte strings as Uint8Array, arrays, maps with text keys as plain objects
 * (other maps as Map), tags as {@link Tagged}, undefined. Throws CborError
 * for duplicate map keys and simple values other than false, true, null,
 * undefined (which have no JS form).
 */
export function decodeValue(buf: Uint8Array): unknown {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let pos = 0;
  // Arguments up to 32 bits are numbers; 64-bit ones bigints.
  const readArg = (ai: number): number | bigint | undefined => {
    if (ai < 24) return ai;
    if (ai === 31) return undefined;
    if (ai < 27) {
      const n = 1 << (ai - 24);
      let v = 0;
      for (let i = 0; i < n; i++) v = v * 256 + buf[pos + i];
      pos += n;
      return v;
    }
    let v = 0n;
    for (let i = 0; i < 8; i++) v = (v << 8n) | BigInt(buf[pos + i]);
    pos += 8;
    return v;
  };
  // An integer is a number when the number prints as that integer (so
  // JSON text round-trips; the inverse of encodeValue), else a bigint.
  const num = (v: number | bigint): number | bigint => (typeof v === 'number' || String(Number(v)) !== String(v) ? v : Number(v));
  const neg = (v: number | bigint): number | bigint => (typeof v === 'number' ? -1 - v : num(-1n - v));
  const item = (): unknown => {
    const ib = buf[pos++];
    const mt = ib >> 5;
    const ai = ib & 31;
    if (mt === 7) {
      if (ai === 25) {
        pos += 2;
        return halfToNumber((buf[pos - 2] << 8) | buf[pos - 1]);
      }
      if (ai === 26) {
        pos += 4;
        return view.getFloat32(pos - 4);
      }
      if (ai === 27) {
        pos += 8;
        return view.getFloat64(pos - 8);
      }
      if (ib === 0xf4) return false;
      if (ib === 0xf5) return true;
      if (ib === 0xf6) return null;
      if (ib === 0xf7) return undefined;
      throw new CborError('a simple value with no JS form');
    }
    const arg = readArg(ai);
    switch (mt) {
      case 0:
        return num(arg!);
      case 1:
        return neg(arg!);
      case 2:
      case 3: {
        let bytes: Uint8Array;
        if (arg === undefined) {
          const chunks: Uint8Array[] = [];
          while (buf[pos] !== 0xff) {
            const n = Number(readArgAt());
            chunks.push(buf.subarray(pos, pos + n));
            pos += n;
          }
          pos++;
          bytes = concat(...chunks);
        } else {
          // Text is decoded from a view; a byte string is handed out as a copy.
          bytes = mt === 3 ? buf.subarray(pos, pos + Number(arg)) : buf.slice(pos, pos + Number(arg));
          pos += Number(arg);
        }
        if (mt === 2) return bytes;
        const s = decodeUtf8(bytes);
        if (s === undefined) throw new CborError('text is not UTF-8');
        return s;
      }
      case 4: {
        const out: unknown[] = [];
        if (arg === undefined) {
          while (buf[pos] !== 0xff) out.push(item());
          pos++;
        } else {
          for (let i = 0; i < Number(arg); i++) out.push(item());
        }
        return out;
      }
      case 5: {
        const entries: [unknown, unknown][] = [];
        if (arg === undefined) {
          while (buf[pos] !== 0xff) entries.push([item(), item()]);
          pos++;
        } else {
          for (let i = 0; i < Number(arg); i++) entries.push([item(), item()]);
        }
        if (entries.every(([k]) => typeof k === 'string')) {
          const obj: Record<string, unknown> = {};
          for (const [k, v] of entries) {
            if (Object.hasOwn(obj, k as string)) throw new CborError('duplicate map key');
            // An own data property even for "__proto__" (an assignment would set the prototype).
            if (k === '__proto__') Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
            else obj[k as string] = v;
          }
          return obj;
        }
        const m = new Map<unknown, unknown>();
        for (const [k, v] of entries) {
          if (m.has(k)) throw new CborError('duplicate map key');
          m.set(k, v);
        }
        return m;
      }
      default:
        return new Tagged(num(arg!), item());
    }
  };
  const readArgAt = (): number | bigint => {
    const ai = buf[pos++] & 31;
    return readArg(ai)!;
  };
  return item();
}
