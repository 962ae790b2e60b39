// Minting and verification (FORMAT.md §3, §4, §5, §6, §8).
import { base64urlDecodeStrict, base64urlEncode, concat, isWellFormed, utf8 } from './bytes.js';
import { CborError, checkStateBytes, decodeValue, encodeClaims, encodeValue, parseClaims } from './cbor.js';
import { ReqstateError, fail } from './errors.js';
import { ALGORITHM_IDS, Key, Keyring, formatInstant, type KeyringSources } from './keyring.js';
import { primitives } from './primitives.js';
import { TOKEN_ID_LEN, recordedOrThrow, spentId, spentRecord, storeRefusal, type ReplayStore, type SpentId, type SpentRecord, type SyncReplayStore } from './singleuse.js';

export const U64_MAX = (1n << 64n) - 1n;
const KIND_STATE = 0;
const KIND_SEALED = 1;
const KIND_SINGLE_USE = 2;
const KIND_NAMES = ['a state token', 'a sealed payload', 'a single-use token'];
const MAX_TOOL = 256;
const MAX_STEP = 256;
const MAX_CONTEXT = 65536;

/** Policy limits (FORMAT.md §8), with the Rust `Policy` defaults and bounds. */
export interface PolicyOptions {
  /** Longest token minted or accepted, characters: 64..=1048576, default 8192. */
  maxTokenLen?: number;
  /** Clock leeway, seconds: 0..=600, default 60. */
  clockLeeway?: number;
  /** Longest lifetime minted or accepted, seconds: 1..=2592000, default 86400. */
  maxLifetime?: number;
}

export class Policy {
  readonly maxTokenLen: number;
  readonly clockLeeway: number;
  readonly maxLifetime: number;
  constructor(options: PolicyOptions = {}) {
    const { maxTokenLen = 8192, clockLeeway = 60, maxLifetime = 86400 } = options;
    const check = (v: number, lo: number, hi: number, name: string) => {
      if (!Number.isInteger(v) || v < lo || v > hi) fail('invalid_argument', `${name} must be an integer in ${lo}..=${hi}`);
    };
    check(maxTokenLen, 64, 1048576, 'max_token_len');
    check(clockLeeway, 0, 600, 'clock_leeway');
    check(maxLifetime, 1, 2592000, 'max_lifetime');
    this.maxTokenLen = maxTokenLen;
    this.clockLeeway = clockLeeway;
    this.maxLifetime = maxLifetime;
  }
}

/** Unix seconds; a bigint for readings beyond 2^53. */
export type Clock = () => number | bigint;
/** Fills n bytes from a cryptographically secure source (throw if it cannot). */
export type RandomSource = (n: number) => Uint8Array;

export const systemClock: Clock = () => Math.floor(Date.now() / 1000);
// Random bytes are drawn from crypto.getRandomValues 4 KiB at a time (one
// call costs about as much as a 24-byte one). Pooling is safe here because
// the nonce is hedged (FORMAT.md §4.2): even a pool copied into two processes
// (fork, VM snapshot) cannot make two different messages share a nonce.
let pool = new Uint8Array(0);
let poolOffset = 0;
export const systemRandom: RandomSource = (n) => {
  if (n > 1024) return crypto.getRandomValues(new Uint8Array(n));
  if (poolOffset + n > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(4096));
    poolOffset = 0;
  }
  const out = pool.slice(poolOffset, poolOffset + n);
  pool.fill(0, poolOffset, poolOffset + n);
  poolOffset += n;
  return out;
};

export interface CodecOptions {
  /**
   * A {@link Keyring}, or keyring text: TOML (docs/KEYRING.md) or the compact
   * form. Its schedule, if any, is checked against the policy
   * ({@link Keyring.checkSchedule}: `invalid_keyring` if a `retire_at` would
   * refuse tokens still live).
   */
  keyring: Keyring | string;
  /** How `secret_file` / `secret_env` of a TOML keyring are resolved. */
  sources?: KeyringSources;
  policy?: Policy | PolicyOptions;
  clock?: Clock;
  random?: RandomSource;
}

export type Context = Uint8Array | string;

export interface MintOptions {
  tool: string;
  step: string;
  /** The state as a JS value (see `encodeValue`); null when omitted. */
  state?: unknown;
  /** The state as the bytes of one CBOR item, embedded as is (instead of `state`). */
  stateCbor?: Uint8Array;
  /** Lifetime in whole seconds, default 600. */
  ttl?: number | bigint;
  /** Bytes bound into the token (e.g. `callContext(...)`); a string is taken as UTF-8. */
  context?: Context;
}

export interface Minted {
  token: string;
  keyId: number;
  issuedAt: number;
  expiresAt: number;
}

export interface VerifyOptions {
  tool: string;
  context?: Context;
  /** The step the token must be for (`wrong_step` otherwise). */
  expectedStep?: string;
  /**
   * Step 14: how the state is decoded. Default: the built-in CBOR decoder
   * (`state_decoding` on a state it cannot represent). A function gets the
   * state's bytes and its failure is `state_decoding`; `false` skips the step
   * (`state` is then undefined and `stateCbor` holds the state).
   */
  decode?: boolean | ((stateCbor: Uint8Array) => unknown);
}

export interface Verified<T = unknown> {
  step: string;
  state: T;
  /** The state item's bytes as the token carries them. */
  stateCbor: Uint8Array;
  keyId: number;
  issuedAt: number;
  expiresAt: number;
  /** Exact values (unix seconds up to 2^64 - 1). */
  issuedAtBig: bigint;
  expiresAtBig: bigint;
}

function bytesOf(c: Context | undefined, what: string): Uint8Array {
  if (c === undefined) return new Uint8Array(0);
  if (typeof c === 'string') {
    if (!isWellFormed(c)) fail('invalid_argument', `${what} holds a lone surrogate`);
    return utf8(c);
  }
  if (c instanceof Uint8Array) return c;
  return fail('invalid_argument', `${what} must be a Uint8Array or a string`);
}

function toolBytes(tool: unknown): Uint8Array {
  if (typeof tool !== 'string' || !isWellFormed(tool)) fail('invalid_argument', 'the tool must be a string of UTF-8 text');
  const b = utf8(tool);
  if (b.length < 1 || b.length > MAX_TOOL) fail('invalid_argument', 'the tool must be 1 to 256 bytes');
  return b;
}

function byteLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? (i++, 4) : 3;
  }
  return n;
}

function readClock(clock: Clock): bigint {
  const v = clock();
  const b = typeof v === 'bigint' ? v : Number.isInteger(v) ? BigInt(v) : undefined;
  if (b === undefined || b < 0n || b > U64_MAX) fail('invalid_argument', 'the clock must read an integer in 0..=2^64-1');
  return b;
}

const small = (v: bigint) => Number(v);

/**
 * A keyring, a policy, a clock and a random source: mints and verifies. The
 * key that mints is the keyring's minting key at the clock's reading
 * ({@link Keyring.mintingKey}); a token whose key is retired at that reading
 * (its status, or its `retireAt`) is refused with `retired_key`.
 */
export class Codec {
  readonly keyring: Keyring;
  readonly policy: Policy;
  private readonly clock: Clock;
  private readonly random: RandomSource;

  constructor(options: CodecOptions) {
    this.keyring = typeof options.keyring === 'string' ? Keyring.parse(options.keyring, options.sources) : options.keyring;
    if (!(this.keyring instanceof Keyring)) fail('invalid_keyring', 'keyring must be a Keyring or keyring text');
    this.policy = options.policy instanceof Policy ? options.policy : new Policy(options.policy);
    this.keyring.checkSchedule(this.policy);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? systemRandom;
  }

  // ------------------------------------------------------------ minting

  /** Mints a state token under the key that mints now (FORMAT.md §8, mint list; {@link Keyring.mintingKey}). */
  mint(options: MintOptions): Minted {
    const r = this.mintExact(options);
    return { token: r.token, keyId: r.keyId, issuedAt: small(r.issuedAt), expiresAt: small(r.expiresAt) };
  }

  /** {@link Codec.mint} with exact bigint times (for clocks beyond 2^53). */
  mintExact(options: MintOptions): { token: string; keyId: number; issuedAt: bigint; expiresAt: bigint } {
    return this.mintKind(KIND_STATE, options);
  }

  /**
   * Mints a **single-use** token (FORMAT.md §5.1, kind 2): it carries 16
   * random bytes of token id (24 characters more, so it differs on every mint
   * even under HMAC-SHA256) and is accepted once, by {@link Codec.consume};
   * {@link Codec.verify} refuses it (`single_use`). Mint the round that
   * commits an effect this way. Draws randomness under either algorithm.
   */
  mintSingleUse(options: MintOptions): Minted {
    const r = this.mintSingleUseExact(options);
    return { token: r.token, keyId: r.keyId, issuedAt: small(r.issuedAt), expiresAt: small(r.expiresAt) };
  }

  /** {@link Codec.mintSingleUse} with exact bigint times. */
  mintSingleUseExact(options: MintOptions): { token: string; keyId: number; issuedAt: bigint; expiresAt: bigint } {
    return this.mintKind(KIND_SINGLE_USE, options);
  }

  private draw(n: number): Uint8Array {
    let r: Uint8Array;
    try {
      r = this.random(n);
    } catch (e) {
      throw new ReqstateError('randomness_unavailable', 'the random source failed', { cause: e });
    }
    if (!(r instanceof Uint8Array) || r.length !== n) fail('randomness_unavailable', `the random source did not give ${n} bytes`);
    return r;
  }

  private mintKind(kind: number, options: MintOptions): { token: string; keyId: number; issuedAt: bigint; expiresAt: bigint } {
    // 1. arguments
    const tool = toolBytes(options.tool);
    if (typeof options.step !== 'string' || !isWellFormed(options.step)) fail('invalid_argument', 'the step must be a string of UTF-8 text');
    const step = utf8(options.step);
    if (step.length < 1 || step.length > MAX_STEP) fail('invalid_argument', 'the step must be 1 to 256 bytes');
    const context = bytesOf(options.context, 'context');
    if (context.length > MAX_CONTEXT) fail('invalid_argument', 'the context is over 65536 bytes');
    const ttlIn = options.ttl ?? 600;
    if (typeof ttlIn !== 'number' && typeof ttlIn !== 'bigint') fail('invalid_argument', 'the ttl must be a whole number of seconds');
    if (typeof ttlIn === 'number' && !Number.isInteger(ttlIn)) fail('invalid_argument', 'the ttl must be a whole number of seconds');
    const ttl = BigInt(ttlIn);
    if (ttl < 1n) fail('invalid_argument', 'the ttl must be at least one second');
    // 2. lifetime
    if (ttl > BigInt(this.policy.maxLifetime)) fail('lifetime_too_long', `ttl ${ttl} s is over max_lifetime ${this.policy.maxLifetime} s`);
    // 3. clock
    const now = readClock(this.clock);
    if (now + ttl > U64_MAX) fail('invalid_argument', 'now + ttl overflows 64 bits');
    // 4. state
    let state: Uint8Array;
    if (options.stateCbor !== undefined) {
      if (options.state !== undefined) fail('invalid_argument', 'give state or stateCbor, not both');
      if (!(options.stateCbor instanceof Uint8Array)) fail('state_encoding', 'stateCbor must be a Uint8Array');
      state = options.stateCbor;
      checkStateBytes(state);
    } else {
      // One well-formed item nested at most 16 levels, by construction.
      state = encodeValue(options.state === undefined ? null : options.state);
    }
    let body = encodeClaims(now, ttl, step, state);
    if (kind === KIND_SINGLE_USE) {
      // FORMAT.md §5.1: the token id, drawn after check 4 and before check 5's r.
      body = concat(new Uint8Array([0xa5, 0x00, 0x40 | TOKEN_ID_LEN]), this.draw(TOKEN_ID_LEN), body.subarray(1));
    }
    const key = this.keyring.mintingKey(now);
    // 5. randomness (XChaCha) and 6. size
    const token = base64urlEncode(this.wrap(kind, key, tool, context, body));
    if (token.length > this.policy.maxTokenLen) fail('too_large', `the token would be ${token.length} characters, over max_token_len ${this.policy.maxTokenLen}`);
    return { token, keyId: key.id, issuedAt: now, expiresAt: now + ttl };
  }

  /** Seals opaque bytes bound to `aad` (FORMAT.md §6), under the key that mints now. */
  seal(payload: Uint8Array, aad?: Context): { token: string; keyId: number } {
    const a = bytesOf(aad, 'aad');
    if (a.length > MAX_CONTEXT) fail('invalid_argument', 'the aad is over 65536 bytes');
    if (!(payload instanceof Uint8Array)) fail('invalid_argument', 'the payload must be a Uint8Array');
    const key = this.keyring.mintingKey(readClock(this.clock));
    const token = base64urlEncode(this.wrap(KIND_SEALED, key, new Uint8Array(0), a, payload));
    if (token.length > this.policy.maxTokenLen) fail('too_large', `the token would be ${token.length} characters, over max_token_len ${this.policy.maxTokenLen}`);
    return { token, keyId: key.id };
  }

  private wrap(kind: number, key: Key, tool: Uint8Array, context: Uint8Array, body: Uint8Array): Uint8Array {
    const alg = ALGORITHM_IDS[key.algorithm];
    const prefix = tokenPrefix(kind, alg, key.id);
    if (alg === 1) {
      const mac = key.mac;
      const tag = mac.tag(authInput(mac.lead, prefix, tool, context, body));
      const out = new Uint8Array(prefix.length + body.length + 16);
      put(out, 0, prefix);
      put(out, prefix.length, body);
      for (let i = 0, o = prefix.length + body.length; i < 16; i++) out[o + i] = tag[i];
      return out;
    }
    // FORMAT.md §4.2: the hedged nonce, HMAC-SHA256(K_n, r ‖ A ‖ body)[0..24].
    const r = this.draw(24);
    const mac = key.mac;
    const input = authInput(mac.lead + 24, prefix, tool, context, body);
    const aad = input.slice(mac.lead + 24, input.length - body.length);
    put(input, mac.lead, r);
    const nonce = mac.tag(input).subarray(0, 24);
    input.fill(0);
    const sealed = primitives.seal(key.workingKey, nonce, aad, body);
    const out = new Uint8Array(prefix.length + 24 + sealed.length);
    put(out, 0, prefix);
    put(out, prefix.length, nonce);
    out.set(sealed, prefix.length + 24);
    return out;
  }

  // ------------------------------------------------------------ verification

  /**
   * Verifies a state token (FORMAT.md §8, steps 0 to 14). Throws
   * {@link ReqstateError}; a single-use token is `single_use` (consume it).
   */
  verify<T = unknown>(token: string, options: VerifyOptions): Verified<T> {
    return this.verifyKind<T>(token, options, KIND_STATE).verified;
  }

  /**
   * Consumes a single-use token (FORMAT.md §8 steps 0 to 15): verifies it as
   * {@link Codec.verify} does, then records it as spent in `store`, and only
   * if this was the first time gives its contents. A replay is `replayed`; a
   * store that is full or fails refuses the token (`replay_store_full`,
   * `replay_store_unavailable`). A token that is not single-use is
   * `wrong_kind`. The store is touched only by a token that passed every
   * other check.
   */
  async consume<T = unknown>(token: string, options: VerifyOptions, store: ReplayStore): Promise<Verified<T>> {
    return this.verifySingleUse<T>(token, options).redeem(store);
  }

  /** {@link Codec.consume} with a store that answers synchronously (such as `MemoryReplayStore`). */
  consumeSync<T = unknown>(token: string, options: VerifyOptions, store: SyncReplayStore): Verified<T> {
    return this.verifySingleUse<T>(token, options).redeemSync(store);
  }

  /**
   * Steps 0 to 14 for a single-use token: the contents are reachable only
   * through the {@link Redemption}, once the token is recorded (its `redeem`,
   * or `finish` with the answer of an insert the caller ran itself).
   */
  verifySingleUse<T = unknown>(token: string, options: VerifyOptions): Redemption<T> {
    const { verified, tokenId, now } = this.verifyKind<T>(token, options, KIND_SINGLE_USE);
    if (tokenId === undefined) fail('malformed', 'single-use claims without a token id');
    const record = spentRecord(spentId(verified.keyId, tokenId), verified.expiresAtBig, now, this.policy.clockLeeway);
    return new Redemption(verified, record.id, record.validUntil, now);
  }

  private verifyKind<T>(token: string, options: VerifyOptions, kind: number): { verified: Verified<T>; tokenId?: Uint8Array; now: bigint } {
    // 0. the caller's arguments
    const tool = toolBytes(options.tool);
    const context = bytesOf(options.context, 'context');
    if (context.length > MAX_CONTEXT) fail('invalid_argument', 'the context is over 65536 bytes');
    if (options.expectedStep !== undefined && typeof options.expectedStep !== 'string') fail('invalid_argument', 'the expected step must be a string');
    // One clock reading for the key's retirement (step 7) and the lifetime checks (steps 11-12).
    const now = readClock(this.clock);
    const { key, body } = this.open(token, kind, tool, context, now);
    // 9.
    let claims;
    let tokenId: Uint8Array | undefined;
    try {
      if (kind === KIND_SINGLE_USE) {
        // FORMAT.md §5.1: A5 00 50 <16 bytes>, then §5's entries 1 to 4.
        if (body.length < 3 + TOKEN_ID_LEN || body[0] !== 0xa5 || body[1] !== 0x00 || body[2] !== (0x40 | TOKEN_ID_LEN)) {
          fail('malformed', 'claims envelope: not a single-use envelope (A5 00 50 <16 bytes>)');
        }
        tokenId = body.slice(3, 3 + TOKEN_ID_LEN);
        claims = parseClaims(concat(new Uint8Array([0xa4]), body.subarray(3 + TOKEN_ID_LEN)));
      } else claims = parseClaims(body);
    } catch (e) {
      if (e instanceof CborError) fail('malformed', `claims envelope: ${e.message}`);
      throw e;
    }
    // 10.
    const expires = claims.issuedAt + claims.lifetime;
    if (claims.lifetime === 0n || expires > U64_MAX) fail('malformed', 'lifetime of zero or an expiry beyond 2^64 - 1');
    if (claims.lifetime > BigInt(this.policy.maxLifetime)) fail('lifetime_too_long', `lifetime ${claims.lifetime} s is over max_lifetime`);
    const leeway = BigInt(this.policy.clockLeeway);
    const sat = (x: bigint) => (x > U64_MAX ? U64_MAX : x);
    // 11.
    if (claims.issuedAt > sat(now + leeway)) fail('not_yet_valid', 'issued in the future');
    // 12.
    if (now >= sat(expires + leeway)) fail('expired');
    // 13.
    if (options.expectedStep !== undefined && claims.step !== options.expectedStep) fail('wrong_step', 'the token is for another step');
    // 14.
    let state: unknown = undefined;
    const decode = options.decode ?? true;
    if (decode !== false) {
      try {
        state = decode === true ? decodeValue(claims.state) : decode(claims.state);
      } catch (e) {
        throw new ReqstateError('state_decoding', e instanceof Error ? e.message : 'the state does not decode', { cause: e });
      }
    }
    const verified: Verified<T> = {
      step: claims.step,
      state: state as T,
      stateCbor: claims.state,
      keyId: key.id,
      issuedAt: small(claims.issuedAt),
      expiresAt: small(expires),
      issuedAtBig: claims.issuedAt,
      expiresAtBig: expires,
    };
    return { verified, tokenId, now };
  }

  /** Opens a sealed payload (FORMAT.md §6, §8 steps 0 to 8). */
  unseal(token: string, aad?: Context): { payload: Uint8Array; keyId: number } {
    const a = bytesOf(aad, 'aad');
    if (a.length > MAX_CONTEXT) fail('invalid_argument', 'the aad is over 65536 bytes');
    const { key, body } = this.open(token, KIND_SEALED, new Uint8Array(0), a, readClock(this.clock));
    return { payload: body, keyId: key.id };
  }

  /** Steps 1 to 8 at the clock reading `now`: returns the authenticated body. */
  private open(token: string, kindWanted: number, tool: Uint8Array, context: Uint8Array, now: bigint): { key: Key; body: Uint8Array } {
    if (typeof token !== 'string') fail('malformed', 'the token must be a string');
    // 1.
    const max = this.policy.maxTokenLen;
    if (token.length > max || (token.length * 3 > max && byteLength(token) > max)) fail('too_large', `over max_token_len ${this.policy.maxTokenLen}`);
    // 2.
    const raw = base64urlDecodeStrict(token);
    if (raw.length === 0) fail('malformed', 'empty token');
    // 3.
    const h = raw[0];
    const version = h >> 4;
    const kind = (h >> 2) & 3;
    const alg = h & 3;
    if (version !== 1) fail('unsupported_version', `version ${version}`);
    if (kind === 3) fail('malformed', 'reserved kind 3');
    if (alg !== 1 && alg !== 2) fail('unsupported_algorithm', `algorithm ${alg}`);
    // 4.
    let id = 0;
    let pos = 1;
    for (let shift = 0; ; shift += 7) {
      if (pos >= raw.length) fail('malformed', 'truncated key id');
      if (pos - 1 >= 5) fail('malformed', 'key id longer than 5 bytes');
      const b = raw[pos++];
      id += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) {
        if (pos - 1 > 1 && b === 0) fail('malformed', 'key id not minimal');
        break;
      }
    }
    if (id > 0xffffffff) fail('malformed', 'key id of 2^32 or more');
    const prefix = raw.subarray(0, pos);
    // 5.
    if (raw.length < pos + (alg === 1 ? 16 : 40)) fail('malformed', 'too short');
    // 6.
    if (kind !== kindWanted) {
      // A verifier that does not record spent tokens never accepts a single-use one.
      if (kindWanted === KIND_STATE && kind === KIND_SINGLE_USE) fail('single_use', 'a single-use token must be consumed, not merely verified');
      fail('wrong_kind', `${KIND_NAMES[kind]}, not ${KIND_NAMES[kindWanted]}`);
    }
    // 7.
    const key = this.keyring.get(id);
    if (key === undefined) fail('unknown_key', `no key ${id}`);
    if (key.isRetiredAt(now)) fail('retired_key', key.status === 'retired' ? `key ${id} is retired` : `key ${id} is retired since ${formatInstant(key.retireAt!)}`);
    if (ALGORITHM_IDS[key.algorithm] !== alg) fail('algorithm_mismatch', `key ${id} is ${key.algorithm}`);
    // 8.
    if (alg === 1) {
      const body = raw.subarray(pos, raw.length - 16);
      const mac = key.mac;
      const tag = mac.tag(authInput(mac.lead, prefix, tool, context, body)).subarray(0, 16);
      if (!primitives.equal(tag, raw.subarray(raw.length - 16))) fail('authentication_failed');
      return { key, body };
    }
    const body = primitives.open(key.workingKey, raw.subarray(pos, pos + 24), authInput(0, prefix, tool, context, EMPTY), raw.subarray(pos + 24));
    if (body === undefined) fail('authentication_failed');
    return { key, body };
  }
}

/**
 * A single-use token that passed every check of FORMAT.md §8 but the last
 * (step 15): its contents are reachable only by recording it as spent.
 */
export class Redemption<T = unknown> {
  #verified: Verified<T>;
  /** What the record is kept under (`spentId.name`: FORMAT.md §5.1's record name). */
  readonly spentId: SpentId;
  /** The end of this verifier's acceptance window, unix seconds: expires_at + clock_leeway (saturating). */
  readonly recordUntil: bigint;
  /** The verifier's clock at verification, unix seconds. */
  readonly now: bigint;
  /** What a store is asked to record: {@link SpentRecord} (`keepUntil` is how long a shared store keeps it). */
  readonly record: SpentRecord;

  constructor(verified: Verified<T>, spent: SpentId, recordUntil: bigint, now: bigint) {
    this.#verified = verified;
    this.spentId = spent;
    this.recordUntil = recordUntil;
    this.now = now;
    this.record = Object.freeze({ ...spentRecord(spent, verified.expiresAtBig, now, 0), validUntil: recordUntil });
  }

  /** Records the token spent in `store` and, if this was the first time, gives its contents. */
  async redeem(store: ReplayStore): Promise<Verified<T>> {
    let answer: unknown;
    try {
      answer = await store.insertIfAbsent(this.record);
    } catch (e) {
      throw storeRefusal(e);
    }
    return this.finish(recordedOrThrow(answer));
  }

  /** {@link Redemption.redeem} with a store that answers synchronously. */
  redeemSync(store: SyncReplayStore): Verified<T> {
    let answer: unknown;
    try {
      answer = store.insertIfAbsent(this.record);
    } catch (e) {
      throw storeRefusal(e);
    }
    if (answer !== null && typeof answer === 'object' && typeof (answer as { then?: unknown }).then === 'function') {
      throw new TypeError('redeemSync needs a store that answers synchronously; use redeem (or consume) with this store');
    }
    return this.finish(recordedOrThrow(answer));
  }

  /**
   * The end of a redemption whose insert the caller ran itself: `recorded` is
   * what the store's insert-if-absent of {@link Redemption.record} answered
   * (kept until `record.keepUntil`, or an equivalent relative lifetime).
   */
  finish(recorded: boolean): Verified<T> {
    if (recorded !== true) fail('replayed', 'the single-use token was already consumed');
    return this.#verified;
  }
}

const EMPTY = new Uint8Array(0);
let scratch = new Uint8Array(1024);

/** The token's header byte and key id (FORMAT.md §3): `0x10 | kind << 2 | alg`, then the id in LEB128. */
function tokenPrefix(kind: number, alg: number, id: number): Uint8Array {
  let n = 1;
  for (let v = id; v >= 128; v = Math.floor(v / 128)) n++;
  const out = new Uint8Array(1 + n);
  out[0] = 0x10 | (kind << 2) | alg;
  let v = id;
  for (let i = 1; i <= n; i++) {
    const b = v % 128;
    v = Math.floor(v / 128);
    out[i] = i < n ? b | 0x80 : b;
  }
  return out;
}

/**
 * `lead` free bytes, then A ‖ body (FORMAT.md §4: A = prefix ‖ lp(tool) ‖
 * lp(context), lp(x) = u32be(len(x)) ‖ x), in one allocation.
 */
function authInput(lead: number, prefix: Uint8Array, tool: Uint8Array, context: Uint8Array, body: Uint8Array): Uint8Array {
  const n = lead + prefix.length + 8 + tool.length + context.length + body.length;
  // One reused buffer (an ArrayBuffer of more than 64 bytes is allocated
  // outside the JS heap, which costs more than the MAC). Safe: it is filled
  // and hashed with no caller code in between, and zeroed after use where it
  // held a plaintext.
  if (n > scratch.length && n <= 16384) scratch = new Uint8Array(Math.max(n, 2 * scratch.length));
  const out = n <= scratch.length ? scratch.subarray(0, n) : new Uint8Array(n);
  let o = put(out, lead, prefix);
  o = put(out, lp32(out, o, tool.length), tool);
  o = put(out, lp32(out, o, context.length), context);
  put(out, o, body);
  return out;
}

/** Writes u32be(n) at `o`; returns the position after it. */
function lp32(out: Uint8Array, o: number, n: number): number {
  out[o] = n >>> 24;
  out[o + 1] = (n >>> 16) & 0xff;
  out[o + 2] = (n >>> 8) & 0xff;
  out[o + 3] = n & 0xff;
  return o + 4;
}

/** Copies `x` into `out` at `o` (short arrays byte by byte: `set` costs more for them); returns the position after it. */
function put(out: Uint8Array, o: number, x: Uint8Array): number {
  const n = x.length;
  if (n < 48) for (let i = 0; i < n; i++) out[o + i] = x[i];
  else out.set(x, o);
  return o + n;
}

/** Shorthand: `new Codec(options)`. */
export function createCodec(options: CodecOptions): Codec {
  return new Codec(options);
}
