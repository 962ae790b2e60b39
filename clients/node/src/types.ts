// The shapes of the client's requests and results. The names the format
// defines (reasons, algorithms, key statuses) come from @reqstate/codec, in
// the proto's enum spelling: `expired` is `REASON_EXPIRED`.
import type { ChannelCredentials, ChannelOptions } from '@grpc/grpc-js';
import type { Algorithm as FormatAlgorithm, KeyStatus as FormatKeyStatus, Reason as FormatReason } from '@reqstate/codec';

/** `hmac-sha256` → `hmac_sha256`: a format name as the proto spells it (before upper-casing). */
type ProtoSpelling<S extends string> = S extends `${infer Head}-${infer Tail}` ? `${Head}_${ProtoSpelling<Tail>}` : S;

/** Bytes on the wire: a Uint8Array (Buffer is one). Strings are taken as UTF-8. */
export type Bytes = Uint8Array;

/**
 * Why a token did not verify or open: the proto enum `reqstate.v1.Reason`,
 * one name per reason of the format (docs/FORMAT.md §8, `@reqstate/codec`'s
 * `REASONS`) spelled `REASON_<NAME>`, and `REASON_UNSPECIFIED`.
 * `REASON_SINGLE_USE`: a single-use token given to `verify` without
 * `consume`. `REASON_REPLAYED`: already consumed (on any sidecar sharing the
 * replay store). `REASON_REPLAY_STORE_FULL` / `REASON_REPLAY_STORE_UNAVAILABLE`:
 * the replay store could not record it, so it is refused.
 */
export type Reason = 'REASON_UNSPECIFIED' | `REASON_${Uppercase<FormatReason>}`;

/** A key's algorithm, as the proto enum `reqstate.v1.Algorithm` names the format's. */
export type Algorithm = 'ALGORITHM_UNSPECIFIED' | `ALGORITHM_${Uppercase<ProtoSpelling<FormatAlgorithm>>}`;

/** A key's status, as the proto enum `reqstate.v1.KeyStatus` names the keyring's. */
export type KeyStatus = 'KEY_STATUS_UNSPECIFIED' | `KEY_STATUS_${Uppercase<FormatKeyStatus>}`;

/** How to reach and call the sidecar. */
export interface ClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** Per-call deadline in milliseconds (default 5000). */
  deadlineMs?: number;
  /** Channel credentials (default: insecure, right for a Unix socket or loopback). */
  credentials?: ChannelCredentials;
  /**
   * Extra grpc-js channel options; they override the client's own. For a
   * `unix:` target the client sets `grpc.default_authority` to `localhost`
   * (a socket path is not an HTTP/2 authority); set it here to send another.
   */
  channelOptions?: ChannelOptions;
}

/** One token to mint. */
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

/** A minted token. */
export interface MintResult {
  token: string;
  keyId: number;
  /** Unix seconds. */
  expiresAt: number;
  /** Unix seconds. */
  issuedAt: number;
}

/** One item of `mintBatch`'s answer, in the order of the requests. */
export type MintBatchItemResult = ({ ok: true } & MintResult) | { ok: false; reason: Reason; detail: string };

/** One token to verify. */
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

/** A token that verified. */
export interface VerifyValid {
  valid: true;
  step: string;
  /** Set when the token was minted from bytes. */
  state?: Buffer;
  /** Set when the token was minted from `stateJson`. */
  stateJson?: string;
  keyId: number;
  /** Unix seconds. */
  issuedAt: number;
  /** Unix seconds. */
  expiresAt: number;
}

/** A token that did not verify. */
export interface VerifyInvalid {
  valid: false;
  reason: Reason;
  /** For people; match on `reason`. */
  detail: string;
}

/** What `verify` answers: a result either way, never an exception. */
export type VerifyResult = VerifyValid | VerifyInvalid;

/** Bytes to seal. */
export interface SealRequest {
  payload: Bytes | string;
  aad?: Bytes | string;
}

/** A sealed token. */
export interface SealResult {
  token: string;
  keyId: number;
}

/** A sealed token to open. */
export interface UnsealRequest {
  token: string;
  aad?: Bytes | string;
}

/** What `unseal` answers: a result either way, never an exception. */
export type UnsealResult = { valid: true; payload: Buffer; keyId: number } | { valid: false; reason: Reason; detail: string };

/** One key of the sidecar's keyring (never its material). */
export interface KeyInfo {
  id: number;
  algorithm: Algorithm;
  /**
   * What the key does at the sidecar's clock (`ListKeysResult.now`):
   * PRIMARY if it mints, RETIRED if its tokens are refused (by its status or
   * its `retireAt`), ACTIVE if it verifies only (docs/KEYRING.md, "Keys on a
   * schedule").
   */
  status: KeyStatus;
  /** The status the keyring file writes, before its schedule. */
  fileStatus: KeyStatus;
  /** Unix seconds, when the keyring says. */
  createdAt?: number;
  /** Unix seconds from which the key mints (`mint_from`), if scheduled. */
  mintFrom?: number;
  /** Unix seconds from which its tokens are refused (`retire_at`), if scheduled. */
  retireAt?: number;
  /** The last time (unix seconds) this sidecar accepted a token of the key since it started; absent if never. */
  lastVerifiedAt?: number;
  /** Tokens this sidecar minted (Mint, Seal) under the key since it started. */
  minted: number;
  /** Tokens this sidecar accepted under the key since it started. */
  verified: number;
}

/** What a scheduled transition does, as the proto enum `reqstate.v1.TransitionKind` names it. */
export type TransitionKind = 'TRANSITION_KIND_UNSPECIFIED' | 'TRANSITION_KIND_STARTS_MINTING' | 'TRANSITION_KIND_RETIRES';

/** One change of a keyring's schedule. */
export interface Transition {
  /** Unix seconds. */
  at: number;
  keyId: number;
  kind: TransitionKind;
}

/** What `listKeys` answers. */
export interface ListKeysResult {
  /** Every key, ordered by id. */
  keys: KeyInfo[];
  keyringGeneration: number;
  /** The sidecar's clock when it answered (unix seconds): the instant `status` and `mintingKeyId` are for. */
  now: number;
  /** The id of the key that mints at `now`. */
  mintingKeyId: number;
  /** The next scheduled transition after `now`, if any. */
  nextTransition?: Transition;
  /** SHA-256 of the keyring file in service, lowercase hex (empty for `serve --dev`). */
  keyringSha256: string;
  /** The longest token lifetime the sidecar serves, seconds. */
  maxTtlSeconds: number;
  /** The clock leeway the sidecar serves, seconds. */
  clockLeewaySeconds: number;
}
