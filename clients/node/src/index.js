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

/** @param {import('./index.d.ts').MintRequest} req */
function mintMessage(req) {
  if (req === null || typeof req !== 'object') throw new TypeError('mint: the request must be an object');
  /** @type {Record<string, unknown>} */
  const msg = {
    tool: req.tool,
    step: req.step,
    ttlSeconds: req.ttlSeconds ?? 0,
    context: toBytes(req.context, 'context'),
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
  const msg = { token: req.token, tool: req.tool, context: toBytes(req.context, 'context') };
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
   * Mints one token.
   * @param {import('./index.d.ts').MintRequest} req
   * @returns {Promise<import('./index.d.ts').MintResult>}
   */
  async mint(req) {
    const msg = mintMessage(req);
    return mintResult(await this.call('Mint', msg));
  }

  /**
   * Verifies one token. A token that does not verify resolves with
   * `{ valid: false, reason }`; only a refused call rejects.
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
   * Verifies many tokens; results come back in the order of the items.
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

/**
 * Compact JSON with object keys sorted by their UTF-8 bytes: the canonical
 * form the core library's `call_context` digests (docs/FORMAT.md §7).
 * @param {unknown} value
 * @returns {string}
 */
export function canonicalJson(value) {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`canonicalJson: ${typeof value} is not JSON`);
    return text;
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value)
    .filter(([, v]) => v !== undefined && typeof v !== 'function')
    .sort(([a], [b]) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
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
 * request, byte for byte as the core library's `reqstate::call_context`:
 * `SHA-256("reqstate/v1 call-context" ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ SHA-256(canonicalJson(arguments)))`.
 * @param {{ principal: string, audience: string, method: string, arguments: unknown }} parts
 * @returns {Buffer}
 */
export function callContext(parts) {
  const args = createHash('sha256').update(canonicalJson(parts.arguments ?? {}), 'utf8').digest();
  return createHash('sha256')
    .update('reqstate/v1 call-context')
    .update(lengthPrefixed(parts.principal ?? ''))
    .update(lengthPrefixed(parts.audience ?? ''))
    .update(lengthPrefixed(parts.method ?? ''))
    .update(args)
    .digest();
}
