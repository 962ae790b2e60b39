/**
 * Errors. Every refusal of the format is a {@link ReqstateError} whose
 * `reason` is exactly one of the names of the Rust core's `Error::reason()`
 * (docs/FORMAT.md §8, docs/CLI.md "Reasons").
 */

/** The reason names, in the order docs/CLI.md lists them. */
export const REASONS = [
  'too_large',
  'malformed',
  'unsupported_version',
  'unsupported_algorithm',
  'wrong_kind',
  'unknown_key',
  'retired_key',
  'algorithm_mismatch',
  'authentication_failed',
  'expired',
  'not_yet_valid',
  'wrong_step',
  'lifetime_too_long',
  'state_encoding',
  'state_decoding',
  'invalid_argument',
  'randomness_unavailable',
  'invalid_keyring',
  'single_use',
  'replayed',
  'replay_store_full',
  'replay_store_unavailable',
] as const;

export type Reason = (typeof REASONS)[number];

const MESSAGES: Record<Reason, string> = {
  too_large: 'token too large',
  malformed: 'malformed token',
  unsupported_version: 'unsupported token version',
  unsupported_algorithm: 'unsupported algorithm',
  wrong_kind: 'wrong kind of token',
  unknown_key: 'unknown key',
  retired_key: 'retired key',
  algorithm_mismatch: 'algorithm mismatch',
  authentication_failed: 'authentication failed',
  expired: 'token expired',
  not_yet_valid: 'token not yet valid',
  wrong_step: 'wrong step',
  lifetime_too_long: 'lifetime too long',
  state_encoding: 'state encoding failed',
  state_decoding: 'state decoding failed',
  invalid_argument: 'invalid argument',
  randomness_unavailable: 'randomness unavailable',
  invalid_keyring: 'invalid keyring',
  single_use: 'single-use token (consume it, do not merely verify it)',
  replayed: 'token already consumed',
  replay_store_full: 'replay store full',
  replay_store_unavailable: 'replay store unavailable',
};

/**
 * A refusal. `reason` is the machine-readable name; `message` is for people
 * and never contains key material or token contents.
 */
export class ReqstateError extends Error {
  readonly reason: Reason;
  /** What the message says after the reason's name, if anything. */
  readonly detail?: string;
  constructor(reason: Reason, detail?: string, options?: { cause?: unknown }) {
    super(detail ? `${MESSAGES[reason]}: ${detail}` : MESSAGES[reason], options);
    this.name = 'ReqstateError';
    this.reason = reason;
    this.detail = detail;
  }
}

/** Whether `e` is a {@link ReqstateError} (with, optionally, that reason). */
export function isReqstateError(e: unknown, reason?: Reason): e is ReqstateError {
  return e instanceof ReqstateError && (reason === undefined || e.reason === reason);
}

export function fail(reason: Reason, detail?: string): never {
  throw new ReqstateError(reason, detail);
}
