// Byte helpers: UTF-8, hex, base64 (standard and url-safe), concatenation,
// constant-time comparison. No Node APIs.
import { fail } from './errors.js';

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** UTF-8 bytes of a string that must be well-formed (no lone surrogates). */
export function utf8(s: string): Uint8Array {
  // Short ASCII text (tools, steps, keys) without TextEncoder, whose call
  // costs more than the copy on most runtimes.
  const n = s.length;
  if (n <= 64) {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) return encoder.encode(s);
      out[i] = c;
    }
    return out;
  }
  return encoder.encode(s);
}

/** Whether a JS string is well-formed UTF-16 (encodes to UTF-8 without replacement). */
export function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

/** Decodes UTF-8 strictly; returns undefined for invalid UTF-8. */
export function decodeUtf8(b: Uint8Array): string | undefined {
  const n = b.length;
  if (n <= 64) {
    // Short ASCII (valid UTF-8 as it is) without TextDecoder.
    let s = '';
    let i = 0;
    for (; i < n && b[i] < 0x80; i++) s += String.fromCharCode(b[i]);
    if (i === n) return s;
  }
  try {
    return strictDecoder.decode(b);
  } catch {
    return undefined;
  }
}

/** Whether `b[start..end)` is ASCII (and so UTF-8). */
export function isAscii(b: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (b[i] >= 0x80) return false;
  return true;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function u32be(n: number): Uint8Array {
  return new Uint8Array([(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
}

/** `u32be(len(x)) ‖ x` */
export function lp(x: Uint8Array): Uint8Array {
  return concat(u32be(x.length), x);
}

/** Constant-time equality of two byte strings of public length. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

const HEX = '0123456789abcdef';
export function toHex(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i] >> 4] + HEX[b[i] & 15];
  return s;
}

/** Hex (either case, even length) to bytes; undefined if not hex. */
export function fromHex(s: string): Uint8Array | undefined {
  if (s.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(s)) return undefined;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const STD_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL_INDEX = new Int16Array(128).fill(-1);
const STD_INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < 64; i++) {
  URL_INDEX[URL_ALPHABET.charCodeAt(i)] = i;
  STD_INDEX[STD_ALPHABET.charCodeAt(i)] = i;
}

function encode64(b: Uint8Array, alphabet: string): string {
  let s = '';
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = (b[i] << 16) | (b[i + 1] << 8) | b[i + 2];
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63];
  }
  const rest = b.length - i;
  if (rest === 1) {
    const n = b[i] << 16;
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63];
  } else if (rest === 2) {
    const n = (b[i] << 16) | (b[i + 1] << 8);
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63];
  }
  return s;
}

// base64url of 12 bits at a time: two characters per table entry, built
// after the first 256 encodings (a Worker that starts, mints once and is
// evicted does not pay for the table).
let urlPairs: string[] | undefined;
let encodings = 0;

/** base64url without padding (RFC 4648 §5). */
export function base64urlEncode(b: Uint8Array): string {
  if (urlPairs === undefined) {
    if (++encodings <= 256) return encode64(b, URL_ALPHABET);
    urlPairs = Array.from({ length: 4096 }, (_, i) => URL_ALPHABET[i >> 6] + URL_ALPHABET[i & 63]);
  }
  const pairs = urlPairs;
  let s = '';
  let i = 0;
  const whole = b.length - (b.length % 3);
  for (; i < whole; i += 3) {
    const n = (b[i] << 16) | (b[i + 1] << 8) | b[i + 2];
    s += pairs[n >> 12] + pairs[n & 4095];
  }
  return i === b.length ? s : s + encode64(b.subarray(i), URL_ALPHABET);
}

/** Standard base64 with padding. */
export function base64Encode(b: Uint8Array): string {
  const s = encode64(b, STD_ALPHABET);
  return s + '='.repeat((4 - (s.length % 4)) % 4);
}

/**
 * Strict decoding of unpadded text in one alphabet: refuses characters outside
 * it, lengths of 4n+1 and non-zero unused bits. Returns undefined on failure.
 */
function decode64(s: string, index: Int16Array): Uint8Array | undefined {
  const n = s.length;
  if (n % 4 === 1) return undefined;
  const out = new Uint8Array(Math.floor((n * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? index[c] : -1;
    if (v < 0) return undefined;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  if ((acc & ((1 << bits) - 1)) !== 0) return undefined;
  return out;
}

/** FORMAT.md §2: base64url, no padding, canonical. `malformed` on failure. */
export function base64urlDecodeStrict(s: string): Uint8Array {
  const out = decode64(s, URL_INDEX);
  if (out === undefined) fail('malformed', 'not canonical unpadded base64url');
  return out;
}

/** Standard base64, padding optional (but correct if present), canonical. */
export function base64DecodeStd(s: string): Uint8Array | undefined {
  let body = s;
  const pad = s.length - s.replace(/=+$/, '').length;
  if (pad > 0) {
    if (pad > 2 || s.length % 4 !== 0) return undefined;
    body = s.slice(0, s.length - pad);
    if ((body.length % 4) + pad !== 4) return undefined;
  }
  return decode64(body, STD_INDEX);
}
