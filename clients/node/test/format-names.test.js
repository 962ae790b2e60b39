// @ts-check
// The names the format defines, as this client reports them: the proto's
// Reason, Algorithm and KeyStatus enums (the shipped .proto) are the
// format's names from @reqstate/codec in the proto's spelling, and the
// client's `Reason`, `Algorithm` and `KeyStatus` types (derived from
// codec's) list exactly those (checked by tsc on the records below: a name
// missing from a type or from a record fails the type check).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import protoLoader from '@grpc/proto-loader';
import { REASONS } from '@reqstate/codec';
import { PROTO_PATH } from '@reqstate/client';

const definition = protoLoader.loadSync(PROTO_PATH, {});
/** @param {string} name */
const enumNames = (name) => {
  const type = /** @type {any} */ (definition[`reqstate.v1.${name}`]).type;
  return type.value.map((/** @type {{ name: string, number: number }} */ v) => v.name);
};

/** @type {Record<import('@reqstate/client').Reason, true>} */
const reasons = {
  REASON_UNSPECIFIED: true,
  REASON_TOO_LARGE: true,
  REASON_MALFORMED: true,
  REASON_UNSUPPORTED_VERSION: true,
  REASON_UNSUPPORTED_ALGORITHM: true,
  REASON_WRONG_KIND: true,
  REASON_UNKNOWN_KEY: true,
  REASON_RETIRED_KEY: true,
  REASON_ALGORITHM_MISMATCH: true,
  REASON_AUTHENTICATION_FAILED: true,
  REASON_EXPIRED: true,
  REASON_NOT_YET_VALID: true,
  REASON_WRONG_STEP: true,
  REASON_LIFETIME_TOO_LONG: true,
  REASON_STATE_ENCODING: true,
  REASON_STATE_DECODING: true,
  REASON_INVALID_ARGUMENT: true,
  REASON_RANDOMNESS_UNAVAILABLE: true,
  REASON_INVALID_KEYRING: true,
  REASON_SINGLE_USE: true,
  REASON_REPLAYED: true,
  REASON_REPLAY_STORE_FULL: true,
  REASON_REPLAY_STORE_UNAVAILABLE: true,
};
/** @type {Record<import('@reqstate/client').Algorithm, true>} */
const algorithms = { ALGORITHM_UNSPECIFIED: true, ALGORITHM_HMAC_SHA256: true, ALGORITHM_XCHACHA20_POLY1305: true };
/** @type {Record<import('@reqstate/client').KeyStatus, true>} */
const statuses = { KEY_STATUS_UNSPECIFIED: true, KEY_STATUS_PRIMARY: true, KEY_STATUS_ACTIVE: true, KEY_STATUS_RETIRED: true };

test("the proto's Reason enum is the format's reasons, in order, after UNSPECIFIED", () => {
  assert.deepEqual(enumNames('Reason'), ['REASON_UNSPECIFIED', ...REASONS.map((r) => `REASON_${r.toUpperCase()}`)]);
  assert.deepEqual(Object.keys(reasons), enumNames('Reason'));
});

test("the proto's Algorithm and KeyStatus enums are the client's types", () => {
  assert.deepEqual(Object.keys(algorithms), enumNames('Algorithm'));
  assert.deepEqual(Object.keys(statuses), enumNames('KeyStatus'));
});
