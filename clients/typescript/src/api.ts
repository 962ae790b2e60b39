// The API of @reqstate/codec, shared by its two entries: index.ts (the main
// one, with TOML keyrings) and compact.ts (without the TOML parser).
export { REASONS, ReqstateError, isReqstateError, type Reason } from './errors.js';
export {
  Key,
  Keyring,
  MAX_INSTANT,
  formatInstant,
  parseInstant,
  type Algorithm,
  type KeySpec,
  type KeyStatus,
  type KeyringSources,
  type SchedulePolicy,
  type Transition,
} from './keyring.js';
export {
  Codec,
  Policy,
  Redemption,
  createCodec,
  systemClock,
  systemRandom,
  type Clock,
  type CodecOptions,
  type Context,
  type MintOptions,
  type Minted,
  type PolicyOptions,
  type RandomSource,
  type Verified,
  type VerifyOptions,
} from './codec.js';
export {
  MAX_CLOCK_LEEWAY,
  MemoryReplayStore,
  ReplayStoreError,
  TOKEN_ID_LEN,
  recordName,
  spentRecord,
  type MemoryReplayStoreOptions,
  type ReplayStore,
  type SpentId,
  type SpentRecord,
  type SyncReplayStore,
} from './singleuse.js';
export { Tagged, decodeValue, encodeValue, MAX_STATE_DEPTH } from './cbor.js';
export { CALL_CONTEXT_LABEL, InvalidArgumentsError, MAX_ARGUMENTS_DEPTH, callContext, canonicalJson, type ArgumentsRule, type CallContextParts } from './callcontext.js';
export {
  createRequestStateCodec,
  logName,
  mcpCallOf,
  mcpPrincipal,
  stepFromInputResponses,
  stepOfInputRequests,
  type McpAuthInfoLike,
  type McpCall,
  type McpContextLike,
  type McpInputRequiredResult,
  type McpRefusal,
  type McpRequestStateCodec,
  type McpRequestStateCodecOptions,
} from './mcp.js';
export { base64urlEncode, base64Encode, toHex, fromHex } from './bytes.js';
export { cryptoBackend, type Backend } from './primitives.js';
