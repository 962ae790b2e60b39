// The cryptographic primitives, chosen once at load time:
// - `node:crypto` (native, OpenSSL or BoringSSL) where the runtime offers it
//   synchronously: Node >= 20.16, Deno, Bun. It is reached through the
//   global `getBuiltinModule` of Node's process object, a plain function call
//   that no bundler follows, so a Worker bundle never imports `node:crypto`.
// - the pure JavaScript `@noble/*` implementations everywhere else: Cloudflare
//   workerd (always, even with `nodejs_compat`: its node:crypto has no
//   ChaCha20-Poly1305 and loads the Node compatibility layer at start-up),
//   browsers, and Node before 20.16.
// HMAC-SHA256 (and SHA-256) and XChaCha20-Poly1305 are chosen separately:
// Bun's node:crypto (BoringSSL) has no `chacha20-poly1305` cipher, so there
// HMAC is native and the AEAD pure. Both backends compute the same bytes
// (test/backends.test.js compares them; the vector suite runs on each).
import { xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { hmac as nobleHmac } from '@noble/hashes/hmac.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

/** Where a primitive is computed: the runtime's `node:crypto`, or pure JavaScript (`@noble/*`). */
export type Backend = 'node:crypto' | 'pure';

/**
 * HMAC-SHA256 under one key. `tag(input)` is the 32-byte tag of
 * `input[lead..]`: the caller leaves the first `lead` bytes free for the
 * implementation (the native one writes the key's inner pad there, so that
 * one buffer is hashed without a copy) and must not use them afterwards. The
 * tag may be node:crypto's own Uint8Array subclass: copy it before handing it out.
 */
export interface Mac {
  readonly lead: number;
  tag(input: Uint8Array): Uint8Array;
}

/** @internal HMAC-SHA256 of `data` under `mac` (a copy of `data` with the lead in front). */
export function macOf(mac: Mac, data: Uint8Array): Uint8Array {
  const input = new Uint8Array(mac.lead + data.length);
  input.set(data, mac.lead);
  const t = mac.tag(input);
  input.fill(0);
  const out = new Uint8Array(32);
  out.set(t);
  return out;
}

/** @internal One implementation of every primitive the codec uses. */
export interface Primitives {
  readonly hmacBackend: Backend;
  readonly aeadBackend: Backend;
  /** SHA-256 of `data`. */
  sha256(data: Uint8Array): Uint8Array;
  /** HMAC-SHA256 prepared for `key`. */
  hmacKey(key: Uint8Array): Mac;
  /** XChaCha20-Poly1305: ciphertext ‖ 16-byte tag. */
  seal(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Uint8Array;
  /** XChaCha20-Poly1305: the plaintext, or undefined if the tag does not verify. */
  open(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, sealed: Uint8Array): Uint8Array | undefined;
  /** Constant-time equality of two byte strings of public length. */
  equal(a: Uint8Array, b: Uint8Array): boolean;
}

/** Constant-time equality in JavaScript (no early exit on a difference). */
function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

const pureHmacKey = (key: Uint8Array): Mac => {
  const prepared = nobleHmac.create(nobleSha256, key);
  return { lead: 0, tag: (input) => prepared.clone().update(input).digest() };
};

/** @internal The pure JavaScript primitives (`@noble/hashes`, `@noble/ciphers`). */
export const purePrimitives: Primitives = {
  hmacBackend: 'pure',
  aeadBackend: 'pure',
  sha256: (data) => nobleSha256(data),
  hmacKey: pureHmacKey,
  seal: (key, nonce, aad, plaintext) => xchacha20poly1305(key, nonce, aad).encrypt(plaintext),
  open: (key, nonce, aad, sealed) => {
    try {
      return xchacha20poly1305(key, nonce, aad).decrypt(sealed);
    } catch {
      return undefined;
    }
  },
  equal: equalBytes,
};

// ------------------------------------------------------------------ HChaCha20

const rotl = (x: number, n: number) => (x << n) | (x >>> (32 - n));
const le32 = (b: Uint8Array, i: number) => b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24);

/**
 * @internal HChaCha20 (draft-irtf-cfrg-xchacha §2.2): the XChaCha20 subkey of
 * a 32-byte key and the first 16 bytes of a 24-byte nonce.
 */
export function hchacha20(key: Uint8Array, nonce: Uint8Array): Uint8Array {
  let x0 = 0x61707865, x1 = 0x3320646e, x2 = 0x79622d32, x3 = 0x6b206574; // prettier-ignore
  let x4 = le32(key, 0), x5 = le32(key, 4), x6 = le32(key, 8), x7 = le32(key, 12); // prettier-ignore
  let x8 = le32(key, 16), x9 = le32(key, 20), x10 = le32(key, 24), x11 = le32(key, 28); // prettier-ignore
  let x12 = le32(nonce, 0), x13 = le32(nonce, 4), x14 = le32(nonce, 8), x15 = le32(nonce, 12); // prettier-ignore
  for (let i = 0; i < 10; i++) {
    // column rounds
    x0 = (x0 + x4) | 0; x12 = rotl(x12 ^ x0, 16); x8 = (x8 + x12) | 0; x4 = rotl(x4 ^ x8, 12); // prettier-ignore
    x0 = (x0 + x4) | 0; x12 = rotl(x12 ^ x0, 8); x8 = (x8 + x12) | 0; x4 = rotl(x4 ^ x8, 7); // prettier-ignore
    x1 = (x1 + x5) | 0; x13 = rotl(x13 ^ x1, 16); x9 = (x9 + x13) | 0; x5 = rotl(x5 ^ x9, 12); // prettier-ignore
    x1 = (x1 + x5) | 0; x13 = rotl(x13 ^ x1, 8); x9 = (x9 + x13) | 0; x5 = rotl(x5 ^ x9, 7); // prettier-ignore
    x2 = (x2 + x6) | 0; x14 = rotl(x14 ^ x2, 16); x10 = (x10 + x14) | 0; x6 = rotl(x6 ^ x10, 12); // prettier-ignore
    x2 = (x2 + x6) | 0; x14 = rotl(x14 ^ x2, 8); x10 = (x10 + x14) | 0; x6 = rotl(x6 ^ x10, 7); // prettier-ignore
    x3 = (x3 + x7) | 0; x15 = rotl(x15 ^ x3, 16); x11 = (x11 + x15) | 0; x7 = rotl(x7 ^ x11, 12); // prettier-ignore
    x3 = (x3 + x7) | 0; x15 = rotl(x15 ^ x3, 8); x11 = (x11 + x15) | 0; x7 = rotl(x7 ^ x11, 7); // prettier-ignore
    // diagonal rounds
    x0 = (x0 + x5) | 0; x15 = rotl(x15 ^ x0, 16); x10 = (x10 + x15) | 0; x5 = rotl(x5 ^ x10, 12); // prettier-ignore
    x0 = (x0 + x5) | 0; x15 = rotl(x15 ^ x0, 8); x10 = (x10 + x15) | 0; x5 = rotl(x5 ^ x10, 7); // prettier-ignore
    x1 = (x1 + x6) | 0; x12 = rotl(x12 ^ x1, 16); x11 = (x11 + x12) | 0; x6 = rotl(x6 ^ x11, 12); // prettier-ignore
    x1 = (x1 + x6) | 0; x12 = rotl(x12 ^ x1, 8); x11 = (x11 + x12) | 0; x6 = rotl(x6 ^ x11, 7); // prettier-ignore
    x2 = (x2 + x7) | 0; x13 = rotl(x13 ^ x2, 16); x8 = (x8 + x13) | 0; x7 = rotl(x7 ^ x8, 12); // prettier-ignore
    x2 = (x2 + x7) | 0; x13 = rotl(x13 ^ x2, 8); x8 = (x8 + x13) | 0; x7 = rotl(x7 ^ x8, 7); // prettier-ignore
    x3 = (x3 + x4) | 0; x14 = rotl(x14 ^ x3, 16); x9 = (x9 + x14) | 0; x4 = rotl(x4 ^ x9, 12); // prettier-ignore
    x3 = (x3 + x4) | 0; x14 = rotl(x14 ^ x3, 8); x9 = (x9 + x14) | 0; x4 = rotl(x4 ^ x9, 7); // prettier-ignore
  }
  const out = new Uint8Array(32);
  const words = [x0, x1, x2, x3, x12, x13, x14, x15];
  for (let i = 0; i < 8; i++) {
    const w = words[i];
    out[4 * i] = w & 0xff;
    out[4 * i + 1] = (w >>> 8) & 0xff;
    out[4 * i + 2] = (w >>> 16) & 0xff;
    out[4 * i + 3] = w >>> 24;
  }
  return out;
}

// ------------------------------------------------------------------ node:crypto

/** The part of node:crypto used here (Node, Deno and Bun all provide it). */
interface NodeCrypto {
  hash?: (algorithm: string, data: Uint8Array, outputEncoding: 'buffer') => Uint8Array;
  createHash(algorithm: string): { update(data: Uint8Array): { digest(): Uint8Array } };
  createHmac(algorithm: string, key: Uint8Array): { update(data: Uint8Array): { digest(): Uint8Array } };
  createCipheriv(algorithm: string, key: Uint8Array, iv: Uint8Array, options: { authTagLength: number }): NodeCipher;
  createDecipheriv(algorithm: string, key: Uint8Array, iv: Uint8Array, options: { authTagLength: number }): NodeDecipher;
  getCiphers(): string[];
  timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}
interface NodeCipher {
  setAAD(aad: Uint8Array, options: { plaintextLength: number }): unknown;
  update(data: Uint8Array): Uint8Array;
  final(): Uint8Array;
  getAuthTag(): Uint8Array;
}
interface NodeDecipher {
  setAAD(aad: Uint8Array, options: { plaintextLength: number }): unknown;
  setAuthTag(tag: Uint8Array): unknown;
  update(data: Uint8Array): Uint8Array;
  final(): Uint8Array;
}

/**
 * node:crypto if this runtime hands it out synchronously, else undefined.
 * Never in workerd (its user agent is `Cloudflare-Workers`).
 */
function loadNodeCrypto(): NodeCrypto | undefined {
  const g = globalThis as { navigator?: { userAgent?: unknown }; process?: { getBuiltinModule?: (id: string) => unknown } };
  if (g.navigator?.userAgent === 'Cloudflare-Workers') return undefined;
  const p = g.process;
  if (p === undefined || p === null || typeof p.getBuiltinModule !== 'function') return undefined;
  let c: Partial<NodeCrypto> | undefined;
  try {
    c = p.getBuiltinModule('node:crypto') as Partial<NodeCrypto> | undefined;
  } catch {
    return undefined;
  }
  if (c === undefined || c === null || typeof c.createHmac !== 'function' || typeof c.createHash !== 'function' || typeof c.timingSafeEqual !== 'function') return undefined;
  return c as NodeCrypto;
}

/**
 * A plain Uint8Array of what node:crypto returned (its own Uint8Array
 * subclass): a view when it owns its whole ArrayBuffer (Node's hash and
 * cipher outputs do), else a copy, so that no caller ever reaches a shared
 * pool through `.buffer`, and `slice` copies as on every Uint8Array.
 */
function own(b: Uint8Array): Uint8Array {
  if (b.byteOffset === 0 && b.buffer.byteLength === b.length) return new Uint8Array(b.buffer as ArrayBuffer);
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}

function nativePrimitives(c: NodeCrypto): Primitives {
  const oneShot = typeof c.hash === 'function' ? c.hash.bind(c) : undefined;
  const sha256 = oneShot ? (data: Uint8Array) => own(oneShot('sha256', data, 'buffer')) : (data: Uint8Array) => own(c.createHash('sha256').update(data).digest());
  // HMAC (RFC 2104) over two one-shot hashes, the key's pads prepared once:
  // no hash or HMAC object per call. Without crypto.hash, createHmac per call.
  const hmacKey = (key: Uint8Array): Mac => {
    if (!oneShot) {
      const k = key.slice();
      return { lead: 0, tag: (input) => c.createHmac('sha256', k).update(input).digest() };
    }
    const k = key.length > 64 ? sha256(key) : key;
    const ipad = new Uint8Array(64).fill(0x36);
    const outer = new Uint8Array(96).fill(0x5c, 0, 64);
    for (let i = 0; i < k.length; i++) {
      ipad[i] ^= k[i];
      outer[i] ^= k[i];
    }
    return {
      lead: 64,
      tag: (input) => {
        for (let i = 0; i < 64; i++) input[i] = ipad[i];
        const h = oneShot('sha256', input, 'buffer');
        for (let i = 0; i < 32; i++) outer[64 + i] = h[i];
        return oneShot('sha256', outer, 'buffer');
      },
    };
  };
  const aead = c.getCiphers().includes('chacha20-poly1305');
  // XChaCha20-Poly1305 = ChaCha20-Poly1305 (RFC 8439) under the HChaCha20
  // subkey, with the nonce's last 8 bytes after 4 zero bytes.
  const ietf = (key: Uint8Array, nonce: Uint8Array): [Uint8Array, Uint8Array] => {
    if (key.length !== 32 || nonce.length !== 24) throw new RangeError('XChaCha20-Poly1305 takes a 32-byte key and a 24-byte nonce');
    const iv = new Uint8Array(12);
    iv.set(nonce.subarray(16, 24), 4);
    return [hchacha20(key, nonce.subarray(0, 16)), iv];
  };
  return {
    hmacBackend: 'node:crypto',
    aeadBackend: aead ? 'node:crypto' : 'pure',
    sha256,
    hmacKey,
    seal: aead
      ? (key, nonce, aad, plaintext) => {
          const [subkey, iv] = ietf(key, nonce);
          const cipher = c.createCipheriv('chacha20-poly1305', subkey, iv, { authTagLength: 16 });
          subkey.fill(0);
          cipher.setAAD(aad, { plaintextLength: plaintext.length });
          const ct = cipher.update(plaintext);
          const last = cipher.final();
          const tag = cipher.getAuthTag();
          const out = new Uint8Array(ct.length + last.length + 16);
          out.set(ct);
          out.set(last, ct.length);
          out.set(tag, ct.length + last.length);
          return out;
        }
      : purePrimitives.seal,
    open: aead
      ? (key, nonce, aad, sealed) => {
          if (sealed.length < 16) return undefined;
          const [subkey, iv] = ietf(key, nonce);
          const decipher = c.createDecipheriv('chacha20-poly1305', subkey, iv, { authTagLength: 16 });
          subkey.fill(0);
          decipher.setAAD(aad, { plaintextLength: sealed.length - 16 });
          decipher.setAuthTag(sealed.subarray(sealed.length - 16));
          const pt = decipher.update(sealed.subarray(0, sealed.length - 16));
          let last: Uint8Array;
          try {
            // OpenSSL compares the tag in constant time; final() throws when it differs.
            last = decipher.final();
          } catch {
            pt.fill(0);
            return undefined;
          }
          if (last.length === 0) return own(pt);
          const out = new Uint8Array(pt.length + last.length);
          out.set(pt);
          out.set(last, pt.length);
          pt.fill(0);
          return out;
        }
      : purePrimitives.open,
    equal: (a, b) => a.length === b.length && c.timingSafeEqual(a, b),
  };
}

const nodeCrypto = loadNodeCrypto();

/** @internal The node:crypto primitives, or undefined where the runtime has none (workerd, browsers, Node < 20.16). */
export const native: Primitives | undefined = nodeCrypto === undefined ? undefined : nativePrimitives(nodeCrypto);

/** @internal The primitives this runtime uses. */
export const primitives: Primitives = native ?? purePrimitives;

/**
 * Where this runtime computes the package's primitives: `node:crypto` on
 * Node (>= 20.16), Deno and Bun (whose node:crypto lacks ChaCha20-Poly1305,
 * so its AEAD is pure), pure JavaScript (`@noble/*`) on Cloudflare Workers,
 * in browsers and on older Node. The tokens are the same bytes either way.
 */
export function cryptoBackend(): { hmac: Backend; aead: Backend } {
  return { hmac: primitives.hmacBackend, aead: primitives.aeadBackend };
}
