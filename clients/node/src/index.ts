// @reqstate/client: a Node client for the reqstate sidecar
// (`reqstate serve`, service `reqstate.v1.RequestState`). What the format
// defines (the call context, the reason names) is @reqstate/codec's: the call
// context functions below are its own, re-exported, not a copy.
export { Client, PROTO_PATH, UNIX_SOCKET_AUTHORITY, grpcTarget } from './client.js';
export { ReqstateError, TransportError, status, type TransportErrorFields } from './errors.js';
export type {
  Algorithm,
  Bytes,
  ClientOptions,
  KeyInfo,
  KeyStatus,
  ListKeysResult,
  MintBatchItemResult,
  MintRequest,
  MintResult,
  Reason,
  SealRequest,
  SealResult,
  Transition,
  TransitionKind,
  UnsealRequest,
  UnsealResult,
  VerifyInvalid,
  VerifyRequest,
  VerifyResult,
  VerifyValid,
} from './types.js';
export {
  CALL_CONTEXT_LABEL,
  InvalidArgumentsError,
  MAX_ARGUMENTS_DEPTH,
  callContext,
  canonicalJson,
  type ArgumentsRule,
  type CallContextParts,
} from '@reqstate/codec';
