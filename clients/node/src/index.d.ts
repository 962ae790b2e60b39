// Types of @reqstate/client (hand-written; the implementation is src/index.js).
import type { ChannelCredentials, ChannelOptions } from '@grpc/grpc-js';

/** Bytes on the wire: a Uint8Array (Buffer is one). Strings are taken as UTF-8. */
export type Bytes = Uint8Array;

/** Why a token did not verify or open (proto enum `reqstate.v1.Reason`). */
export type Reason =
  | 'REASON_UNSPECIFIED'
  | 'REASON_TOO_LARGE'
  | 'REASON_MALFORMED'
  | 'REASON_UNSUPPORTED_VERSION'
  | 'REASON_UNSUPPORTED_ALGORITHM'
  | 'REASON_WRONG_KIND'
  | 'REASON_UNKNOWN_KEY'
  | 'REASON_RETIRED_KEY'
  | 'REASON_ALGORITHM_MISMATCH'
  | 'REASON_AUTHENTICATION_FAILED'
  | 'REASON_EXPIRED'
  | 'REASON_NOT_YET_VALID'
  | 'REASON_WRONG_STEP'
  | 'REASON_LIFETIME_TOO_LONG'
  | 'REASON_STATE_ENCODING'
  | 'REASON_STATE_DECODING'
  | 'REASON_INVALID_ARGUMENT'
  | 'REASON_RANDOMNESS_UNAVAILABLE'
  | 'REASON_INVALID_KEYRING'
  /** A single-use token given to `verify` without `consume`: it must be consumed. */
  | 'REASON_SINGLE_USE'
  /** The single-use token was already consumed (on any sidecar sharing the replay store). */
  | 'REASON_REPLAYED'
  /** The replay store is full of live records: the token was not recorded and is refused. */
  | 'REASON_REPLAY_STORE_FULL'
  /** The replay store did not answer (in time): the token was not recorded and is refused. */
  | 'REASON_REPLAY_STORE_UNAVAILABLE';

export type Algorithm = 'ALGORITHM_UNSPECIFIED' | 'ALGORITHM_HMAC_SHA256' | 'ALGORITHM_XCHACHA20_POLY1305';
export type KeyStatus = 'KEY_STATUS_UNSPECIFIED' | 'KEY_STATUS_PRIMARY' | 'KEY_STATUS_ACTIVE' | 'KEY_STATUS_RETIRED';

export interface ClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** Per-call deadline in milliseconds (default 5000). */
  deadlineMs?: number;
  /** Channel credentials (default: insecure, right for a Unix socket or loopback). */
  credentials?: ChannelCredentials;
  /** Extra grpc-js channel options. */
  channelOptions?: ChannelOptions;
}

export interface MintRequest {
  /** The MCP tool name; bound into the tag, not stored. */
  tool: string;
  /** The step of the flow; stored and returned by verify. */
  step: string;
  /** The state as opaque bytes (returned as `state`). */
  state?: Bytes | string;
  /** The state as JSON text (returned as `stateJson`, re-serialized compactly). */
  stateJson?: string;
  /** Lifetime in seconds; 0 or absent means the sidecar's default. */
  ttlSeconds?: number;
  /** Caller context (see `callContext`); authenticated, not stored. */
  context?: Bytes | string;
  /**
   * Mint a single-use token: `verify` refuses it (`REASON_SINGLE_USE`),
   * `verify({ consume: true })` accepts it once (`REASON_REPLAYED` after).
   * Mint the round that commits an effect this way. 24 characters longer.
   */
  singleUse?: boolean;
}

export interface MintResult {
  token: string;
  keyId: number;
  /** Unix seconds. */
  expiresAt: number;
  /** Unix seconds. */
  issuedAt: number;
}

export type MintBatchItemResult =
  | ({ ok: true } & MintResult)
  | { ok: false; reason: Reason; detail: string };

export interface VerifyRequest {
  token: string;
  tool: string;
  /** When set, the token must be for this step (REASON_WRONG_STEP otherwise). */
  expectedStep?: string;
  context?: Bytes | string;
  /**
   * Consume a single-use token: after every other check passes, the sidecar
   * records it as spent in its replay store and accepts it only the first
   * time (`REASON_REPLAYED` afterwards). A token that is not single-use is
   * `REASON_WRONG_KIND`; a store that cannot record it refuses it
   * (`REASON_REPLAY_STORE_FULL`, `REASON_REPLAY_STORE_UNAVAILABLE`).
   */
  consume?: boolean;
}

export interface VerifyValid {
  valid: true;
  step: string;
  /** Set when the token was minted from bytes. */
  state?: Buffer;
  /** Set when the token was minted from `stateJson`. */
  stateJson?: string;
  keyId: number;
  issuedAt: number;
  expiresAt: number;
}

export interface VerifyInvalid {
  valid: false;
  reason: Reason;
  /** For people; match on `reason`. */
  detail: string;
}

export type VerifyResult = VerifyValid | VerifyInvalid;

export interface SealRequest {
  payload: Bytes | string;
  aad?: Bytes | string;
}

export interface SealResult {
  token: string;
  keyId: number;
}

export interface UnsealRequest {
  token: string;
  aad?: Bytes | string;
}

export type UnsealResult =
  | { valid: true; payload: Buffer; keyId: number }
  | { valid: false; reason: Reason; detail: string };

export interface KeyInfo {
  id: number;
  algorithm: Algorithm;
  status: KeyStatus;
  /** Unix seconds, when the keyring says. */
  createdAt?: number;
}

export interface ListKeysResult {
  keys: KeyInfo[];
  keyringGeneration: number;
}

export declare const PROTO_PATH: string;
export declare const status: typeof import('@grpc/grpc-js').status;

export declare class ReqstateError extends Error {
  constructor(message: string, options?: ErrorOptions);
}

export declare class TransportError extends ReqstateError {
  /** Numeric gRPC status code. */
  readonly code: number;
  /** e.g. "UNAVAILABLE", "UNAUTHENTICATED". */
  readonly codeName: string;
  readonly details: string;
  /** The sidecar's `reqstate-reason` trailer, when sent. */
  readonly reason?: Reason;
  readonly method?: string;
  constructor(
    message: string,
    fields: { code: number; details?: string; reason?: Reason; method?: string; cause?: unknown },
  );
}

export declare class Client {
  /** @param target `unix:///path/to/reqstate.sock` or `host:port` */
  constructor(target: string, options?: ClientOptions);
  readonly target: string;
  mint(req: MintRequest): Promise<MintResult>;
  verify(req: VerifyRequest): Promise<VerifyResult>;
  mintBatch(items: MintRequest[]): Promise<MintBatchItemResult[]>;
  verifyBatch(items: VerifyRequest[]): Promise<VerifyResult[]>;
  seal(req: SealRequest): Promise<SealResult>;
  unseal(req: UnsealRequest): Promise<UnsealResult>;
  listKeys(): Promise<ListKeysResult>;
  close(): void;
}

/** The domain label of the call context digest: `reqstate/v1 call-context-jcs`. */
export declare const CALL_CONTEXT_LABEL: 'reqstate/v1 call-context-jcs';

/** Deepest nesting of arrays and objects accepted in the arguments (128). */
export declare const MAX_ARGUMENTS_DEPTH: 128;

/** The rule an `InvalidArgumentError` names. */
export type InvalidArgumentReason = 'not_json' | 'duplicate_key' | 'inexact_number' | 'lone_surrogate' | 'too_deep';

/** Arguments that JCS (RFC 8785) cannot represent exactly, or that are not JSON. */
export declare class InvalidArgumentError extends Error {
  constructor(reason: InvalidArgumentReason, message: string);
  readonly code: 'invalid_argument';
  readonly reason: InvalidArgumentReason;
}

/**
 * The JCS (RFC 8785) text of the arguments' JSON text, identical to the core
 * library's `reqstate::canonical_json` (docs/FORMAT.md §7). Throws
 * `InvalidArgumentError`.
 */
export declare function canonicalJson(argumentsJson: string): string;

/**
 * The 32-byte call context, identical to the core library's
 * `reqstate::call_context`. Give `argumentsJson` (the text as received) or
 * `arguments` (a parsed value; `{}` when both are absent). Throws
 * `InvalidArgumentError`.
 */
export declare function callContext(parts: {
  principal: string;
  audience: string;
  method: string;
  argumentsJson?: string;
  arguments?: unknown;
}): Buffer;
