// The client of one sidecar: requests checked and converted to the proto's
// messages, answers converted back, failures as TransportError.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { TransportError, reasonOfTrailer, statusName } from './errors.js';
import type {
  ClientOptions,
  KeyInfo,
  ListKeysResult,
  MintBatchItemResult,
  MintRequest,
  MintResult,
  SealRequest,
  SealResult,
  UnsealRequest,
  UnsealResult,
  VerifyRequest,
  VerifyResult,
} from './types.js';

/** The .proto shipped inside this package (a copy of the repository's `proto/`). */
export const PROTO_PATH: string = fileURLToPath(new URL('../proto/reqstate/v1/reqstate.proto', import.meta.url));

/**
 * The `:authority` sent on a `unix:` target unless the caller sets
 * `grpc.default_authority`. The socket is the address and the authority
 * names nothing, but it must be a valid URI authority: upstream h2 (hyper,
 * tonic) resets a stream whose authority is a socket path, as gRPC's C core
 * sends it. Set here rather than left to grpc-js's resolver, so the client
 * needs neither a particular grpc-js nor the sidecar's patched h2.
 */
export const UNIX_SOCKET_AUTHORITY = 'localhost';

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false, // camelCase field names: ttlSeconds, stateJson, keyId …
  longs: Number, // uint64 unix seconds and TTLs fit a double
  enums: String, // "REASON_EXPIRED", "KEY_STATUS_PRIMARY" …
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

let serviceCtor: grpc.ServiceClientConstructor | undefined;
function service(): grpc.ServiceClientConstructor {
  if (!serviceCtor) {
    const definition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(definition) as any;
    serviceCtor = pkg.reqstate.v1.RequestState as grpc.ServiceClientConstructor;
  }
  return serviceCtor;
}

function toBytes(value: string | Uint8Array | undefined | null, what: string): Buffer {
  if (value === undefined || value === null) return Buffer.alloc(0);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`${what} must be a Uint8Array, a Buffer or a string`);
}

/**
 * An optional boolean flag: absent is false; anything but a boolean throws
 * (protobufjs would read the string "false" as true).
 */
function flag(value: unknown, what: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new TypeError(`${what} must be a boolean`);
  return value;
}

function mintMessage(req: MintRequest): Record<string, unknown> {
  if (req === null || typeof req !== 'object') throw new TypeError('mint: the request must be an object');
  const msg: Record<string, unknown> = {
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

type Message = any; // a decoded proto message (proto-loader's plain objects)

function mintResult(m: Message): MintResult {
  return { token: m.token, keyId: m.keyId, expiresAt: m.expiresAt, issuedAt: m.issuedAt };
}

function verifyMessage(req: VerifyRequest): Record<string, unknown> {
  if (req === null || typeof req !== 'object') throw new TypeError('verify: the request must be an object');
  const msg: Record<string, unknown> = {
    token: req.token,
    tool: req.tool,
    context: toBytes(req.context, 'context'),
    consume: flag(req.consume, 'verify: consume'),
  };
  if (req.expectedStep !== undefined && req.expectedStep !== null) msg.expectedStep = req.expectedStep;
  return msg;
}

function verifyResult(m: Message): VerifyResult {
  if (!m.valid) return { valid: false, reason: m.reason, detail: m.detail };
  const out: VerifyResult = {
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
 * The gRPC target of an address as the command line writes it: `tcp:HOST:PORT`
 * (docs/CLI.md, `--listen`, `--connect`) is grpc-js's `HOST:PORT`, which
 * would otherwise read `tcp` as a host name and fail to resolve
 * `dns:tcp:...`; `unix:` and `host:port` are grpc-js's own.
 */
export function grpcTarget(target: string): string {
  return target.startsWith('tcp:') ? target.slice('tcp:'.length) : target;
}

/**
 * A client of one sidecar. Cheap to keep for the life of the process; one
 * HTTP/2 connection is shared by every call.
 */
export class Client {
  /** The target given to the constructor. */
  readonly target: string;
  private readonly grpc: grpc.Client;
  private readonly token: string | undefined;
  private readonly deadlineMs: number;

  /**
   * @param target `unix:/path/to/reqstate.sock` (or `unix:///path`), `host:port`, or the
   *   command line's own `tcp:host:port` (`reqstate serve --listen`, `--connect`)
   * @param options bearer token, deadline, credentials, channel options
   */
  constructor(target: string, options: ClientOptions = {}) {
    if (typeof target !== 'string' || target === '') throw new TypeError('target must be "unix:/path", "host:port" or "tcp:host:port"');
    const Ctor = service();
    this.grpc = new Ctor(grpcTarget(target), options.credentials ?? grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      // Not left to grpc-js's resolver (see UNIX_SOCKET_AUTHORITY).
      ...(target.startsWith('unix:') ? { 'grpc.default_authority': UNIX_SOCKET_AUTHORITY } : {}),
      ...options.channelOptions,
    });
    this.token = options.token;
    this.deadlineMs = options.deadlineMs ?? 5000;
    this.target = target;
  }

  private call(method: string, request: object): Promise<Message> {
    const metadata = new grpc.Metadata();
    if (this.token !== undefined && this.token !== null) metadata.set('authorization', `Bearer ${this.token}`);
    const deadline = new Date(Date.now() + this.deadlineMs);
    const rpc = method[0].toLowerCase() + method.slice(1);
    return new Promise((resolve, reject) => {
      const callback = (err: Message, res: Message) => {
        if (!err) return resolve(res);
        const reasonValue = err.metadata?.get?.('reqstate-reason')?.[0];
        const reason = reasonValue === undefined ? undefined : reasonOfTrailer(String(reasonValue));
        const code = typeof err.code === 'number' ? err.code : grpc.status.UNKNOWN;
        reject(
          new TransportError(`reqstate ${method} failed: ${statusName(code)}: ${err.details ?? err.message}`, {
            code,
            details: err.details,
            reason,
            method,
            cause: err,
          }),
        );
      };
      try {
        (this.grpc as Message)[rpc](request, metadata, { deadline }, callback);
      } catch (err) {
        // grpc-js throws synchronously on a closed client.
        const message = err instanceof Error ? err.message : String(err);
        reject(
          new TransportError(`reqstate ${method} failed: ${message}`, {
            code: grpc.status.UNAVAILABLE,
            details: message,
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
   */
  async mint(req: MintRequest): Promise<MintResult> {
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
   */
  async verify(req: VerifyRequest): Promise<VerifyResult> {
    const msg = verifyMessage(req);
    return verifyResult(await this.call('Verify', msg));
  }

  /**
   * Mints many tokens; results come back in the order of the items, each
   * `{ ok: true, token, … }` or `{ ok: false, reason, detail }`.
   */
  async mintBatch(items: MintRequest[]): Promise<MintBatchItemResult[]> {
    const res = await this.call('MintBatch', { items: items.map(mintMessage) });
    return res.results.map(
      (r: Message): MintBatchItemResult =>
        r.outcome === 'minted'
          ? { ok: true, ...mintResult(r.minted) }
          : { ok: false, reason: r.error?.reason ?? 'REASON_UNSPECIFIED', detail: r.error?.detail ?? '' },
    );
  }

  /**
   * Verifies many tokens; results come back in the order of the items. Items
   * with `consume: true` are consumed as by `verify`: the same single-use
   * token twice in one batch is accepted at most once.
   */
  async verifyBatch(items: VerifyRequest[]): Promise<VerifyResult[]> {
    const res = await this.call('VerifyBatch', { items: items.map(verifyMessage) });
    return res.results.map(verifyResult);
  }

  /** Seals opaque bytes bound to `aad` (no expiry is added). */
  async seal(req: SealRequest): Promise<SealResult> {
    const res = await this.call('Seal', { payload: toBytes(req.payload, 'payload'), aad: toBytes(req.aad, 'aad') });
    return { token: res.token, keyId: res.keyId };
  }

  /**
   * Opens a sealed token. A token that does not open resolves with
   * `{ valid: false, reason }`.
   */
  async unseal(req: UnsealRequest): Promise<UnsealResult> {
    const res = await this.call('Unseal', { token: req.token, aad: toBytes(req.aad, 'aad') });
    if (!res.valid) return { valid: false, reason: res.reason, detail: res.detail };
    return { valid: true, payload: res.payload, keyId: res.keyId };
  }

  /**
   * The keys the sidecar holds (never their material): what each does at
   * the sidecar's clock, its schedule and its evidence; the key that mints
   * now and the next scheduled transition.
   */
  async listKeys(): Promise<ListKeysResult> {
    const res = await this.call('ListKeys', {});
    const given = (v: unknown) => v !== undefined && v !== null;
    const out: ListKeysResult = {
      keyringGeneration: res.keyringGeneration,
      keys: res.keys.map((k: Message) => {
        const key: KeyInfo = { id: k.id, algorithm: k.algorithm, status: k.status, fileStatus: k.fileStatus, minted: k.minted, verified: k.verified };
        if (given(k.createdAt)) key.createdAt = k.createdAt;
        if (given(k.mintFrom)) key.mintFrom = k.mintFrom;
        if (given(k.retireAt)) key.retireAt = k.retireAt;
        if (given(k.lastVerifiedAt)) key.lastVerifiedAt = k.lastVerifiedAt;
        return key;
      }),
      now: res.now,
      mintingKeyId: res.mintingKeyId,
      keyringSha256: res.keyringSha256,
      maxTtlSeconds: res.maxTtlSeconds,
      clockLeewaySeconds: res.clockLeewaySeconds,
    };
    const t: Message = res.nextTransition;
    if (t !== undefined && t !== null) out.nextTransition = { at: t.at, keyId: t.keyId, kind: t.kind };
    return out;
  }

  /** Closes the connection. Calls made afterwards reject. */
  close(): void {
    this.grpc.close();
  }
}
