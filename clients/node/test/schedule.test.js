// @ts-check
// Keys on a schedule (docs/KEYRING.md) through the client, against a real
// `reqstate serve`: every result that names a key (mint, mintBatch, verify,
// consume, verifyBatch, seal, unseal) names the key that minted or the key
// of the token across a scheduled takeover and retirement, and listKeys
// reports the schedule (status at the sidecar's clock, file status,
// mint_from, retire_at, the minting key, the next transition) and the
// evidence (minted, verified, last verified, keyring SHA-256, policy).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@reqstate/client';
import { Sidecar, secret } from './support/sidecar.js';

const rfc3339 = (/** @type {number} */ unix) => new Date(unix * 1000).toISOString().replace('.000Z', 'Z');
const sleepUntil = async (/** @type {number} */ unix) => {
  const ms = unix * 1000 - Date.now();
  if (ms > 0) await new Promise((r) => setTimeout(r, ms + 150));
};

// Key 2 takes over 5 s after the file is written; key 1 (max lifetime 2 s, no leeway) is
// retired at the earliest safe instant, 2 s after that.
const TAKEOVER = Math.ceil(Date.now() / 1000) + 5;
const RETIRE = TAKEOVER + 2;
const KEYRING =
  `version = 1\n\n[[key]]\nid = 1\nstatus = "primary"\nretire_at = ${rfc3339(RETIRE)}\nsecret = "${secret(1)}"\n\n` +
  `[[key]]\nid = 2\nalgorithm = "hmac-sha256"\nstatus = "active"\nmint_from = ${rfc3339(TAKEOVER)}\nsecret = "${secret(2)}"\n`;

/** @type {Sidecar} */
let sidecar;
/** @type {Client} */
let client;
before(async () => {
  sidecar = await Sidecar.start({ keyring: KEYRING, args: ['--max-ttl', '2', '--default-ttl', '2', '--clock-leeway', '0'] });
  client = new Client(sidecar.unixTarget, { deadlineMs: 5000 });
});
after(async () => {
  client?.close();
  await sidecar?.stop();
});

test('every result names its key across a scheduled takeover and retirement; listKeys shows the schedule', async () => {
  const call = { tool: 'redeem', step: 'confirm', stateJson: '{"n":1}', ttlSeconds: 2 };
  const ids = (/** @type {Array<{ valid: boolean, keyId?: number } | { ok: boolean, keyId?: number }>} */ rs) =>
    rs.map((r) => ('valid' in r ? (r.valid ? r.keyId : 'refused') : r.ok ? r.keyId : 'failed'));

  // Before the takeover: key 1 mints; key 2 verifies only.
  assert.ok(Date.now() / 1000 < TAKEOVER - 1, 'the sidecar took too long to start for this schedule');
  const before1 = await client.mint(call);
  const once1 = await client.mint({ ...call, singleUse: true });
  const sealed1 = await client.seal({ payload: 'p', aad: 'a' });
  assert.deepEqual([before1.keyId, once1.keyId, sealed1.keyId], [1, 1, 1]);
  assert.deepEqual(ids(await client.mintBatch([call, { ...call, singleUse: true }])), [1, 1]);
  const verified1 = await client.verify({ token: before1.token, tool: 'redeem' });
  assert.ok(verified1.valid);
  assert.equal(verified1.keyId, 1);
  const consumed1 = await client.verify({ token: once1.token, tool: 'redeem', consume: true });
  assert.ok(consumed1.valid, JSON.stringify(consumed1));
  assert.equal(consumed1.keyId, 1);
  const unsealed1 = await client.unseal({ token: sealed1.token, aad: 'a' });
  assert.ok(unsealed1.valid);
  assert.equal(unsealed1.keyId, 1);
  const listedBefore = await client.listKeys();

  // From the takeover: key 2 mints, without a reload; key 1's tokens still verify.
  await sleepUntil(TAKEOVER);
  const late1 = await client.unseal({ token: sealed1.token, aad: 'a' });
  assert.deepEqual([late1.valid, late1.valid && late1.keyId], [true, 1]);
  const after2 = await client.mint(call);
  const once2 = await client.mint({ ...call, singleUse: true });
  const sealed2 = await client.seal({ payload: 'p', aad: 'a' });
  assert.deepEqual([after2.keyId, once2.keyId, sealed2.keyId], [2, 2, 2]);
  assert.deepEqual(ids(await client.mintBatch([call])), [2]);
  assert.deepEqual(
    ids(
      await client.verifyBatch([
        { token: after2.token, tool: 'redeem' },
        { token: once2.token, tool: 'redeem', consume: true },
      ]),
    ),
    [2, 2],
  );
  const unsealed2 = await client.unseal({ token: sealed2.token, aad: 'a' });
  assert.deepEqual([unsealed2.valid, unsealed2.valid && unsealed2.keyId], [true, 2]);
  const listedAfter = await client.listKeys();

  // From retire_at: key 1's tokens are refused (retirement comes before expiry in the checks).
  await sleepUntil(RETIRE);
  const retired = await client.unseal({ token: sealed1.token, aad: 'a' });
  assert.equal(retired.valid ? 'valid' : retired.reason, 'REASON_RETIRED_KEY');
  const retiredVerify = await client.verify({ token: before1.token, tool: 'redeem' });
  assert.equal(retiredVerify.valid ? 'valid' : retiredVerify.reason, 'REASON_RETIRED_KEY');
  const still2 = await client.unseal({ token: sealed2.token, aad: 'a' });
  assert.deepEqual([still2.valid, still2.valid && still2.keyId], [true, 2]);
  const listedRetired = await client.listKeys();

  // listKeys: the schedule at the sidecar's clock, and the evidence.
  const sha = createHash('sha256').update(readFileSync(path.join(sidecar.dir, 'keyring.toml'))).digest('hex');
  for (const [listed, minting, next, status1, status2] of /** @type {const} */ ([
    [listedBefore, 1, { at: TAKEOVER, keyId: 2, kind: 'TRANSITION_KIND_STARTS_MINTING' }, 'KEY_STATUS_PRIMARY', 'KEY_STATUS_ACTIVE'],
    [listedAfter, 2, { at: RETIRE, keyId: 1, kind: 'TRANSITION_KIND_RETIRES' }, 'KEY_STATUS_ACTIVE', 'KEY_STATUS_PRIMARY'],
    [listedRetired, 2, undefined, 'KEY_STATUS_RETIRED', 'KEY_STATUS_PRIMARY'],
  ])) {
    const what = JSON.stringify(listed);
    assert.equal(listed.mintingKeyId, minting, what);
    assert.deepEqual(listed.nextTransition, next, what);
    assert.deepEqual(
      listed.keys.map((k) => [k.id, k.algorithm, k.status, k.fileStatus, k.mintFrom, k.retireAt]),
      [
        [1, 'ALGORITHM_XCHACHA20_POLY1305', status1, 'KEY_STATUS_PRIMARY', undefined, RETIRE],
        [2, 'ALGORITHM_HMAC_SHA256', status2, 'KEY_STATUS_ACTIVE', TAKEOVER, undefined],
      ],
      what,
    );
    assert.ok(Math.abs(listed.now - Date.now() / 1000) < 60, what);
    assert.deepEqual([listed.keyringSha256, listed.maxTtlSeconds, listed.clockLeewaySeconds, listed.keyringGeneration], [sha, 2, 0, 1], what);
  }
  // Key 1: 5 minted (mint x2, seal, mintBatch x2), 4 accepted (verify, consume, unseal x2); key 2: 4 minted, 4 accepted by then.
  const [k1, k2] = listedRetired.keys;
  assert.deepEqual([k1.minted, k1.verified, k2.minted, k2.verified], [5, 4, 4, 4], JSON.stringify(listedRetired));
  assert.ok(k1.lastVerifiedAt !== undefined && k1.lastVerifiedAt >= TAKEOVER && k1.lastVerifiedAt < RETIRE, JSON.stringify(k1));
  assert.ok(k2.lastVerifiedAt !== undefined && k2.lastVerifiedAt >= RETIRE, JSON.stringify(k2));
  assert.equal(listedBefore.keys[1].lastVerifiedAt, undefined, 'key 2 had verified nothing yet');
});
