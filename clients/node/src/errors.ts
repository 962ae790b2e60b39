// The errors of calls to the sidecar. (Call-context errors are
// @reqstate/codec's InvalidArgumentsError, re-exported by index.ts.)
import * as grpc from '@grpc/grpc-js';
import { REASONS } from '@reqstate/codec';
import type { Reason } from './types.js';

/** gRPC status codes, by name (`status.UNAUTHENTICATED === 16`). */
export const status: typeof grpc.status = grpc.status;

const STATUS_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(grpc.status)
    .filter(([, v]) => typeof v === 'number')
    .map(([k, v]) => [v, k]),
);

/** The name of a gRPC status code, e.g. `"UNAUTHENTICATED"`. */
export function statusName(code: number): string {
  return STATUS_NAMES[code] ?? `UNKNOWN_CODE_${code}`;
}

/** Every reason of the format, as the proto spells it. */
const PROTO_REASONS: ReadonlySet<string> = new Set(['REASON_UNSPECIFIED', ...REASONS.map((r) => `REASON_${r.toUpperCase()}`)]);

/**
 * The `Reason` of a `reqstate-reason` trailer: the sidecar sends the format's
 * lower-case name (`invalid_argument`), reported as the proto enum name
 * (`REASON_INVALID_ARGUMENT`) like every in-band reason. `undefined` for a
 * value that names no reason of the format.
 */
export function reasonOfTrailer(raw: string): Reason | undefined {
  const name = raw.startsWith('REASON_') ? raw : `REASON_${raw.toUpperCase()}`;
  return PROTO_REASONS.has(name) ? (name as Reason) : undefined;
}

/** Every failure of a call to the sidecar. */
export class ReqstateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ReqstateError';
  }
}

/** What a `TransportError` is built from. */
export interface TransportErrorFields {
  code: number;
  details?: string;
  reason?: Reason;
  method?: string;
  cause?: unknown;
}

/**
 * A call that did not complete: the sidecar unreachable, a deadline
 * exceeded, a caller refused (UNAUTHENTICATED, PERMISSION_DENIED), a
 * malformed request (INVALID_ARGUMENT) or an overloaded sidecar. Invalid
 * tokens are NOT transport errors: they resolve with `{ valid: false }`.
 */
export class TransportError extends ReqstateError {
  /** The numeric gRPC status code (see `status`). */
  readonly code: number;
  /** The gRPC status code's name, e.g. `"UNAUTHENTICATED"`. */
  readonly codeName: string;
  /** The status message sent by the sidecar (or by grpc-js). */
  readonly details: string;
  /** The `reqstate-reason` trailer, when the sidecar sent one naming a reason of the format. */
  readonly reason?: Reason;
  /** The RPC that failed, e.g. `"Mint"`. */
  readonly method?: string;

  constructor(message: string, fields: TransportErrorFields) {
    super(message, { cause: fields.cause });
    this.name = 'TransportError';
    this.code = fields.code;
    this.codeName = statusName(fields.code);
    this.details = fields.details ?? '';
    this.reason = fields.reason;
    this.method = fields.method;
  }
}
