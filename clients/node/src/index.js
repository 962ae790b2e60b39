// @ts-check
/**
 * @reqstate/client: a Node client for the reqstate sidecar
 * (`reqstate serve`, service `reqstate.v1.RequestState`).
 *
 * Types are in ./index.d.ts.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import canonicalize from 'canonicalize';

/** The .proto shipped inside this package (a copy of the repository's `proto/`). */
export const PROTO_PATH = fileURLToPath(new URL('../proto/reqstate/v1/reqstate.proto', import.meta.url));

/** gRPC status codes, by name (`status.UNAUTHENTICATED === 16`). */
export const status = grpc.status;

/** @type {Record<number, string>} */
const STATUS_NAMES = Object.fromEntries(
  Object.entries(grpc.status).filter(([, v]) => typeof v === 'number').map(([k, v]) => [v, k]),
);

/** Every failure raised by this client. */
export class ReqstateError extends Error {
  /** @param {string} message @param {ErrorOptions} [options] */
  constructor(message, options) {
    super(message, options);
    this.name = 'ReqstateError';
  }
}

/**
 * A call that did not complete: the sidecar unreachable, a deadline
 * exceeded, a caller refused (UNAUTHENTICATED, PERMISSION_DENIED), a
 * malformed request (INVALID_ARGUMENT) or an overloaded sidecar. Invalid
 * tokens are NOT transport errors: they resolve with `{ valid: false }`.
 */
export class TransportError extends ReqstateError {
  /**
   * @param {string} message
   * @param {{ code: number, details?: string, reason?: string, method?: string, cause?: unknown }} fields
   */
  constructor(message, fields) {
    super(message, { cause: fields.cause });
    this.name = 'TransportError';
    /** The numeric gRPC status code (see `status`). */
    this.code = fields.code;
    /** The gRPC status code's name, e.g. `"UNAUTHENTICATED"`. */
    this.codeName = STATUS_NAMES[fields.code] ?? `UNKNOWN_CODE_${fields.code}`;
    /** The status message sent by the sidecar (or by grpc-js). */
    this.details = fields.details ?? '';
    /** The `reqstate-reason` trailer (a `Reason` name) when the sidecar sent one. */
    this.reason = fields.reason;
    /** The RPC that failed, e.g. `"Mint"`. */
    this.method = fields.method;
  }
}

/**
 * The sidecar's `reqstate-reason` trailer carries the core library's
 * lower-case reason (`invalid_argument`); report it as the proto enum name
 * (`REASON_INVALID_ARGUMENT`) like every in-band reason.
 * @param {string} raw
 */
function reasonName(raw) {
  return raw.startsWith('REASON_') ? raw : `REASON_${raw.toUpperCase()}`;
}

const LOADER_OPTIONS = {
  keepCase: false, // camelCase field names: ttlSeconds, stateJson, keyId …
  longs: Number, // uint64 unix seconds and TTLs fit a double
  enums: String, // "REASON_EXPIRED", "KEY_STATUS_PRIMARY" …
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

/** @type {grpc.ServiceClientConstructor | undefined} */
let serviceCtor;
function service() {
  if (!serviceCtor) {
    const definition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    const pkg = /** @type {any} */ (grpc.loadPackageDefinition(definition));
    serviceCtor = /** @type {grpc.ServiceClientConstructor} */ (pkg.reqstate.v1.RequestState);
  }
  return serviceCtor;
}

/** @param {string | Uint8Array | undefined | null} value @param {string} what */
function toBytes(value, what) {
  if (value === undefined || value === null) return Buffer.alloc(0);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`${what} must be a Uint8Array, a Buffer or a string`);
}

/**
 * An optional boolean flag: absent is false; anything but a boolean throws
 * (protobufjs would read the string "false" as true).
 * @param {unknown} value @param {string} what
 */
function flag(value, what) {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new TypeError(`${what} must be a boolean`);
  return value;
}

/** @param {import('./index.d.ts').MintRequest} req */
function mintMessage(req) {
  if (req === null || typeof req !== 'object') throw new TypeError('mint: the request must be an object');
  /** @type {Record<string, unknown>} */
  const msg = {
    tool: req.tool,
    step: req.step,
    ttlSeconds: req.ttlSeconds ?? 0,
    context: toBytes(req.context, 'context'),
    singleUse: flag(req.singleUse, 'mint: singleUse'),
  };
  if (req.state !== undefined && req.stateJson !== undefined) {
    throw new TypeError('mint: give either state (bytes) or stateJson (string), not both');
  }
  if (req.state !== undefined) msg.state = toBytes(req.state, 'state');
  if (req.stateJson !== undefined) {
    if (typeof req.stateJson !== 'string') throw new TypeError('mint: stateJson must be a string of JSON text');
    msg.stateJson = req.stateJson;
  }
  return msg;
}

/** @param {any} m @returns {import('./index.d.ts').MintResult} */
function mintResult(m) {
  return { token: m.token, keyId: m.keyId, expiresAt: m.expiresAt, issuedAt: m.issuedAt };
}

/** @param {import('./index.d.ts').VerifyRequest} req */
function verifyMessage(req) {
  if (req === null || typeof req !== 'object') throw new TypeError('verify: the request must be an object');
  /** @type {Record<string, unknown>} */
  const msg = {
    token: req.token,
    tool: req.tool,
    context: toBytes(req.context, 'context'),
    consume: flag(req.consume, 'verify: consume'),
  };
  if (req.expectedStep !== undefined && req.expectedStep !== null) msg.expectedStep = req.expectedStep;
  return msg;
}

/** @param {any} m @returns {import('./index.d.ts').VerifyResult} */
function verifyResult(m) {
  if (!m.valid) return { valid: false, reason: m.reason, detail: m.detail };
  /** @type {import('./index.d.ts').VerifyResult} */
  const out = {
    valid: true,
    step: m.step,
    keyId: m.keyId,
    issuedAt: m.issuedAt,
    expiresAt: m.expiresAt,
  };
  if (m.stateValue === 'stateJson') out.stateJson = m.stateJson;
  else out.state = m.state ?? Buffer.alloc(0);
  return out;
}

/**
 * A client of one sidecar. Cheap to keep for the life of the process; one
 * HTTP/2 connection is shared by every call.
 */
export class Client {
  /**
   * @param {string} target `unix:///path/to/reqstate.sock` or `host:port`
   * @param {import('./index.d.ts').ClientOptions} [options]
   */
  constructor(target, options = {}) {
    if (typeof target !== 'string' || target === '') throw new TypeError('target must be "unix:///path" or "host:port"');
    const Ctor = service();
    /** @private */
    this.grpc = new Ctor(target, options.credentials ?? grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      ...options.channelOptions,
    });
    /** @private */
    this.token = options.token;
    /** @private */
    this.deadlineMs = options.deadlineMs ?? 5000;
    this.target = target;
  }

  /**
   * @private
   * @param {string} method
   * @param {object} request
   * @returns {Promise<any>}
   */
  call(method, request) {
    const metadata = new grpc.Metadata();
    if (this.token !== undefined && this.token !== null) metadata.set('authorization', `Bearer ${this.token}`);
    const deadline = new Date(Date.now() + this.deadlineMs);
    const rpc = method[0].toLowerCase() + method.slice(1);
    return new Promise((resolve, reject) => {
      const callback = (/** @type {any} */ err, /** @type {any} */ res) => {
        if (!err) return resolve(res);
        const reasonValue = err.metadata?.get?.('reqstate-reason')?.[0];
        const reason = reasonValue === undefined ? undefined : reasonName(String(reasonValue));
        reject(
          new TransportError(`reqstate ${method} failed: ${STATUS_NAMES[err.code] ?? err.code}: ${err.details ?? err.message}`, {
            code: typeof err.code === 'number' ? err.code : grpc.status.UNKNOWN,
            details: err.details,
            reason,
            method,
            cause: err,
          }),
        );
      };
      try {
        /** @type {any} */ (this.grpc)[rpc](request, metadata, { deadline }, callback);
      } catch (err) {
        // grpc-js throws synchronously on a closed client.
        reject(
          new TransportError(`reqstate ${method} failed: ${err instanceof Error ? err.message : String(err)}`, {
            code: grpc.status.UNAVAILABLE,
            details: err instanceof Error ? err.message : String(err),
            method,
            cause: err,
          }),
        );
      }
    });
  }

  /**
   * Mints one token; `singleUse: true` mints a token that only a consuming
   * verify accepts, once.
   * @param {import('./index.d.ts').MintRequest} req
   * @returns {Promise<import('./index.d.ts').MintResult>}
   */
  async mint(req) {
    const msg = mintMessage(req);
    return mintResult(await this.call('Mint', msg));
  }

  /**
   * Verifies one token. A token that does not verify resolves with
   * `{ valid: false, reason }`; only a refused call rejects. With
   * `consume: true` a single-use token is accepted once and recorded as spent
   * (`REASON_REPLAYED` afterwards; `REASON_WRONG_KIND` for a token that is not
   * single-use; `REASON_REPLAY_STORE_FULL` / `REASON_REPLAY_STORE_UNAVAILABLE`
   * when the sidecar's replay store cannot record it). Without it a
   * single-use token is `REASON_SINGLE_USE`.
   * @param {import('./index.d.ts').VerifyRequest} req
   * @returns {Promise<import('./index.d.ts').VerifyResult>}
   */
  async verify(req) {
    const msg = verifyMessage(req);
    return verifyResult(await this.call('Verify', msg));
  }

  /**
   * Mints many tokens; results come back in the order of the items, each
   * `{ ok: true, token, … }` or `{ ok: false, reason, detail }`.
   * @param {import('./index.d.ts').MintRequest[]} items
   * @returns {Promise<import('./index.d.ts').MintBatchItemResult[]>}
   */
  async mintBatch(items) {
    const res = await this.call('MintBatch', { items: items.map(mintMessage) });
    return res.results.map((/** @type {any} */ r) =>
      r.outcome === 'minted'
        ? { ok: true, ...mintResult(r.minted) }
        : { ok: false, reason: r.error?.reason ?? 'REASON_UNSPECIFIED', detail: r.error?.detail ?? '' },
    );
  }

  /**
   * Verifies many tokens; results come back in the order of the items. Items
   * with `consume: true` are consumed as by `verify`: the same single-use
   * token twice in one batch is accepted at most once.
   * @param {import('./index.d.ts').VerifyRequest[]} items
   * @returns {Promise<import('./index.d.ts').VerifyResult[]>}
   */
  async verifyBatch(items) {
    const res = await this.call('VerifyBatch', { items: items.map(verifyMessage) });
    return res.results.map(verifyResult);
  }

  /**
   * Seals opaque bytes bound to `aad` (no expiry is added).
   * @param {import('./index.d.ts').SealRequest} req
   * @returns {Promise<import('./index.d.ts').SealResult>}
   */
  async seal(req) {
    const res = await this.call('Seal', { payload: toBytes(req.payload, 'payload'), aad: toBytes(req.aad, 'aad') });
    return { token: res.token, keyId: res.keyId };
  }

  /**
   * Opens a sealed token. A token that does not open resolves with
   * `{ valid: false, reason }`.
   * @param {import('./index.d.ts').UnsealRequest} req
   * @returns {Promise<import('./index.d.ts').UnsealResult>}
   */
  async unseal(req) {
    const res = await this.call('Unseal', { token: req.token, aad: toBytes(req.aad, 'aad') });
    if (!res.valid) return { valid: false, reason: res.reason, detail: res.detail };
    return { valid: true, payload: res.payload, keyId: res.keyId };
  }

  /**
   * The keys the sidecar holds (never their material).
   * @returns {Promise<import('./index.d.ts').ListKeysResult>}
   */
  async listKeys() {
    const res = await this.call('ListKeys', {});
    return {
      keyringGeneration: res.keyringGeneration,
      keys: res.keys.map((/** @type {any} */ k) => {
        /** @type {import('./index.d.ts').KeyInfo} */
        const key = { id: k.id, algorithm: k.algorithm, status: k.status };
        if (k.createdAt !== undefined && k.createdAt !== null) key.createdAt = k.createdAt;
        return key;
      }),
    };
  }

  /** Closes the connection. Calls made afterwards reject. */
  close() {
    this.grpc.close();
  }
}

/** The domain label of the call context digest (docs/FORMAT.md §7). */
export const CALL_CONTEXT_LABEL = 'reqstate/v1 call-context-jcs';

/** Deepest nesting of arrays and objects accepted in the arguments. */
export const MAX_ARGUMENTS_DEPTH = 128;

/**
 * Arguments that JCS (RFC 8785) cannot represent exactly, or that are not
 * JSON. `code` is always `'invalid_argument'` (the core crate's error code);
 * `reason` names the rule: `not_json`, `duplicate_key`, `inexact_number`,
 * `lone_surrogate` or `too_deep`.
 */
export class InvalidArgumentError extends Error {
  /**
   * @param {'not_json' | 'duplicate_key' | 'inexact_number' | 'lone_surrogate' | 'too_deep'} reason
   * @param {string} message
   */
  constructor(reason, message) {
    super(message);
    this.name = 'InvalidArgumentError';
    /** @type {'invalid_argument'} */
    this.code = 'invalid_argument';
    this.reason = reason;
  }
}

const notJson = () => new InvalidArgumentError('not_json', 'arguments are not valid JSON');
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * The exact value of a decimal number text as `sign|digits|exponent`: digits
 * without leading or trailing zeros, the exponent of the last digit; zero is
 * `'0'` whatever its sign or exponent.
 * @param {string} text
 */
function decimalValue(text) {
  const negative = text.startsWith('-');
  const [mantissa, exponent = '0'] = (negative ? text.slice(1) : text).toLowerCase().split('e');
  const [whole, frac = ''] = mantissa.split('.');
  const digits = (whole + frac).replace(/^0+/, '');
  if (digits === '') return '0';
  // An exponent beyond 15 digits only comes with a double that overflowed or
  // underflowed (refused either way): saturate it, as the core crate does.
  const magnitude = exponent.replace(/^[+-]/, '').replace(/^0+/, '');
  let exp = magnitude.length > 15 ? 1e15 : Number(magnitude || '0');
  if (exponent.startsWith('-')) exp = -exp;
  const stripped = digits.replace(/0+$/, '');
  exp += digits.length - stripped.length - frac.length;
  return `${negative ? '-' : '+'}|${stripped}|${exp}`;
}

/**
 * The FORMAT.md §7 number rule: the literal rounds to the nearest double,
 * which must be finite and whose ECMAScript text denotes exactly the
 * literal's decimal value.
 * @param {string} literal
 */
function exactNumber(literal) {
  const double = Number(literal);
  if (!Number.isFinite(double)) {
    throw new InvalidArgumentError('inexact_number', `number ${literal} overflows an IEEE double`);
  }
  const text = String(double);
  if (decimalValue(text) !== decimalValue(literal)) {
    throw new InvalidArgumentError('inexact_number', `number ${literal} is not exactly an IEEE double (JCS would print ${text})`);
  }
  return double;
}

/**
 * A strict RFC 8259 parser that keeps what JSON.parse hides: duplicate keys,
 * number literals, lone surrogate escapes. Objects have a null prototype.
 * @param {string} text
 * @returns {unknown}
 */
function parseStrict(text) {
  let pos = 0;
  const ws = () => {
    while (pos < text.length && ' \t\n\r'.includes(text[pos])) pos++;
  };
  const string = () => {
    const start = pos;
    pos++; // the opening quote
    for (;;) {
      if (pos >= text.length) throw notJson();
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c < 0x20) throw notJson();
      pos += c === 0x5c ? 2 : 1;
    }
    pos++;
    let s;
    try {
      s = JSON.parse(text.slice(start, pos));
    } catch {
      throw notJson();
    }
    if (!s.isWellFormed()) {
      throw new InvalidArgumentError('lone_surrogate', 'arguments have a string with a lone surrogate');
    }
    return s;
  };
  /** @param {number} depth @returns {unknown} */
  const value = (depth) => {
    const c = text[pos];
    if (c === '{' || c === '[') {
      if (depth + 1 > MAX_ARGUMENTS_DEPTH) throw new InvalidArgumentError('too_deep', 'arguments are nested too deeply');
      pos++;
      ws();
      const close = c === '{' ? '}' : ']';
      /** @type {unknown[]} */
      const items = [];
      if (text[pos] === close) {
        pos++;
      } else {
        for (;;) {
          ws();
          if (c === '{') {
            if (text[pos] !== '"') throw notJson();
            const key = string();
            ws();
            if (text[pos] !== ':') throw notJson();
            pos++;
            ws();
            items.push([key, value(depth + 1)]);
          } else {
            items.push(value(depth + 1));
          }
          ws();
          if (text[pos] === ',') {
            pos++;
          } else if (text[pos] === close) {
            pos++;
            break;
          } else {
            throw notJson();
          }
        }
      }
      if (c === '[') return items;
      const object = Object.create(null);
      for (const [key, v] of /** @type {[string, unknown][]} */ (items)) {
        if (Object.hasOwn(object, key)) {
          throw new InvalidArgumentError('duplicate_key', `arguments have a duplicate object key ${JSON.stringify(key)}`);
        }
        object[key] = v;
      }
      return object;
    }
    if (c === '"') return string();
    for (const [word, v] of /** @type {const} */ ([['null', null], ['true', true], ['false', false]])) {
      if (text.startsWith(word, pos)) {
        pos += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m) throw notJson();
    pos += m[0].length;
    return exactNumber(m[0]);
  };
  ws();
  const result = value(0);
  ws();
  if (pos !== text.length) throw notJson();
  return result;
}

/**
 * The JCS (RFC 8785) text of the JSON value `argumentsJson` (the arguments'
 * text as received: any spacing and key order), the form the call context
 * digests (docs/FORMAT.md §7), byte for byte as the core crate's
 * `reqstate::canonical_json`. Throws `InvalidArgumentError` for text that is
 * not one JSON value and for what JCS cannot represent exactly: duplicate
 * keys, numbers whose JCS form is another number (`9007199254740993`, `1e400`,
 * `0.10000000000000001`), lone surrogates, nesting deeper than 128.
 * @param {string} argumentsJson
 * @returns {string}
 */
export function canonicalJson(argumentsJson) {
  if (typeof argumentsJson !== 'string') {
    throw new TypeError('canonicalJson: argumentsJson must be JSON text (a string)');
  }
  const text = canonicalize(parseStrict(argumentsJson));
  // canonicalize() gives undefined only for undefined, which parseStrict never returns.
  if (text === undefined) throw notJson();
  return text;
}

/**
 * The JSON text of already-parsed arguments, as `JSON.stringify` prints them,
 * refusing what it would silently change (NaN and infinities become null).
 * @param {unknown} value
 */
function stringifyArguments(value) {
  /** @type {(v: unknown, depth: number) => void} */
  const check = (v, depth) => {
    if (typeof v === 'number' && !Number.isFinite(v)) {
      throw new InvalidArgumentError('inexact_number', `${v} is not a JSON number`);
    }
    if (v !== null && typeof v === 'object') {
      if (depth >= MAX_ARGUMENTS_DEPTH) throw new InvalidArgumentError('too_deep', 'arguments are nested too deeply');
      for (const child of Object.values(v)) check(child, depth + 1);
    }
  };
  check(value, 0);
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new InvalidArgumentError('not_json', `arguments cannot be JSON: ${/** @type {Error} */ (e).message}`);
  }
  if (text === undefined) throw new InvalidArgumentError('not_json', `arguments cannot be JSON: ${typeof value}`);
  return text;
}

/** @param {string} s */
function lengthPrefixed(s) {
  const bytes = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(bytes.length);
  return Buffer.concat([len, bytes]);
}

/**
 * The 32-byte context that binds a token to one caller and one original
 * request, byte for byte as the core crate's `reqstate::call_context`:
 * `SHA-256("reqstate/v1 call-context-jcs" ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ SHA-256(JCS(arguments)))`.
 *
 * Pass `argumentsJson`, the arguments' JSON text as received, when you have
 * it: only the text shows duplicate keys and how numbers were written. Or
 * pass `arguments`, an already-parsed value (`{}` when undefined): it is printed with
 * `JSON.stringify` and that text canonicalized, so NaN, infinities and lone
 * surrogates are refused but what `JSON.parse` already resolved is not seen.
 * Throws `InvalidArgumentError` (see `canonicalJson`).
 * @param {{ principal: string, audience: string, method: string, argumentsJson?: string, arguments?: unknown }} parts
 * @returns {Buffer}
 */
export function callContext(parts) {
  const text = parts.argumentsJson ?? (parts.arguments === undefined ? '{}' : stringifyArguments(parts.arguments));
  const args = createHash('sha256').update(canonicalJson(text), 'utf8').digest();
  return createHash('sha256')
    .update(CALL_CONTEXT_LABEL)
    .update(lengthPrefixed(parts.principal ?? ''))
    .update(lengthPrefixed(parts.audience ?? ''))
    .update(lengthPrefixed(parts.method ?? ''))
    .update(args)
    .digest();
}
