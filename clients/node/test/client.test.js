// @ts-check
// The client against a real `reqstate serve` process, over a Unix socket
// and over TCP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, ReqstateError, TransportError, callContext, status } from '@reqstate/client';
import { REPO, Sidecar, freePort } from './support/sidecar.js';

/**
 * Flips one character of a token in the middle (still valid base64url).
 * @param {string} token
 */
function tamper(token) {
  const i = Math.floor(token.length / 2);
  const c = token[i] === 'A' ? 'B' : 'A';
  return token.slice(0, i) + c + token.slice(i + 1);
}

const ctxA = callContext({ principal: 'user-42', audience: 'counter-server', method: 'tools/call', arguments: { current: 10 } });
const ctxB = callContext({ principal: 'user-43', audience: 'counter-server', method: 'tools/call', arguments: { current: 10 } });

/** @type {Sidecar} */
let sidecar;

before(async () => {
  // No clock leeway, so that a 1-second token is expired 2 seconds later.
  sidecar = await Sidecar.start({ args: ['--clock-leeway', '0'] });
});
after(async () => {
  await sidecar?.stop();
});

for (const transport of ['unix', 'tcp', 'tcp: as the command line writes it']) {
  describe(`over ${transport}`, () => {
    /** @type {Client} */
    let client;
    before(() => {
      // The command line's `tcp:HOST:PORT` (issue 40 item 10) is taken as grpc-js's `HOST:PORT`.
      const target = transport === 'unix' ? sidecar.unixTarget : transport === 'tcp' ? sidecar.tcpTarget : `tcp:${sidecar.tcpTarget}`;
      client = new Client(target, { deadlineMs: 5000 });
    });
    after(() => client.close());

    test('mint and verify a JSON state', async () => {
      const minted = await client.mint({
        tool: 'increase-counter',
        step: 'confirm',
        stateJson: '{ "current": 10, "amount": 5 }',
        ttlSeconds: 600,
        context: ctxA,
      });
      assert.equal(typeof minted.token, 'string');
      assert.match(minted.token, /^[A-Za-z0-9_-]+$/);
      assert.equal(minted.keyId, 1);
      assert.equal(minted.expiresAt - minted.issuedAt, 600);
      assert.ok(Math.abs(minted.issuedAt - Date.now() / 1000) < 120);

      const verified = await client.verify({
        token: minted.token,
        tool: 'increase-counter',
        expectedStep: 'confirm',
        context: ctxA,
      });
      assert.equal(verified.valid, true);
      assert.ok(verified.valid);
      assert.equal(verified.step, 'confirm');
      // The one mapping (docs/CLI.md): keys sorted by their UTF-8 bytes, as
      // `reqstate verify` prints them.
      assert.equal(verified.stateJson, '{"amount":5,"current":10}');
      assert.equal(verified.state, undefined);
      assert.equal(verified.keyId, 1);
      assert.equal(verified.issuedAt, minted.issuedAt);
      assert.equal(verified.expiresAt, minted.expiresAt);
    });

    test('mint and verify a bytes state (Uint8Array in, Buffer out)', async () => {
      const state = new Uint8Array([0, 1, 2, 254, 255]);
      const minted = await client.mint({ tool: 't', step: 's', state });
      const verified = await client.verify({ token: minted.token, tool: 't' });
      assert.ok(verified.valid);
      assert.ok(Buffer.isBuffer(verified.state));
      assert.deepEqual([...(verified.state ?? [])], [...state]);
      assert.equal(verified.stateJson, undefined);
    });

    test('no state: empty bytes', async () => {
      const minted = await client.mint({ tool: 't', step: 's' });
      const verified = await client.verify({ token: minted.token, tool: 't' });
      assert.ok(verified.valid);
      assert.equal(verified.state?.length, 0);
    });

    test('a tampered token is invalid in-band', async () => {
      const minted = await client.mint({ tool: 't', step: 's', stateJson: '{"a":1}', context: ctxA });
      const verified = await client.verify({ token: tamper(minted.token), tool: 't', context: ctxA });
      assert.equal(verified.valid, false);
      assert.ok(!verified.valid);
      assert.equal(verified.reason, 'REASON_AUTHENTICATION_FAILED');
      assert.ok(verified.detail.length > 0);
      const garbage = await client.verify({ token: 'not a token!', tool: 't' });
      assert.deepEqual({ valid: garbage.valid, reason: !garbage.valid && garbage.reason }, { valid: false, reason: 'REASON_MALFORMED' });
    });

    test('another tool is invalid in-band', async () => {
      const minted = await client.mint({ tool: 'increase-counter', step: 's', context: ctxA });
      const verified = await client.verify({ token: minted.token, tool: 'whoami', context: ctxA });
      assert.equal(verified.valid, false);
      assert.equal(!verified.valid && verified.reason, 'REASON_AUTHENTICATION_FAILED');
    });

    test('another context is invalid in-band', async () => {
      const minted = await client.mint({ tool: 't', step: 's', context: ctxA });
      const verified = await client.verify({ token: minted.token, tool: 't', context: ctxB });
      assert.equal(!verified.valid && verified.reason, 'REASON_AUTHENTICATION_FAILED');
      const none = await client.verify({ token: minted.token, tool: 't' });
      assert.equal(!none.valid && none.reason, 'REASON_AUTHENTICATION_FAILED');
    });

    test('another step is invalid in-band', async () => {
      const minted = await client.mint({ tool: 't', step: 'amount' });
      const verified = await client.verify({ token: minted.token, tool: 't', expectedStep: 'confirm' });
      assert.equal(!verified.valid && verified.reason, 'REASON_WRONG_STEP');
    });

    test('a malformed mint rejects with INVALID_ARGUMENT and its reason', async () => {
      await assert.rejects(client.mint({ tool: '', step: 's' }), (err) => {
        assert.ok(err instanceof TransportError);
        assert.ok(err instanceof ReqstateError);
        assert.equal(err.code, status.INVALID_ARGUMENT);
        assert.equal(err.codeName, 'INVALID_ARGUMENT');
        assert.equal(err.reason, 'REASON_INVALID_ARGUMENT');
        assert.equal(err.method, 'Mint');
        return true;
      });
      await assert.rejects(client.mint({ tool: 't', step: 's', stateJson: '{nope' }), { code: status.INVALID_ARGUMENT });
      await assert.rejects(client.mint({ tool: 't', step: 's', ttlSeconds: 10 * 86400 }), { code: status.INVALID_ARGUMENT });
    });

    test('state and stateJson together are refused before any call', async () => {
      await assert.rejects(client.mint({ tool: 't', step: 's', state: Buffer.from('x'), stateJson: '{}' }), TypeError);
    });

    test('seal and unseal', async () => {
      const payload = Buffer.from('{"claims":"of the SDK"}');
      const sealed = await client.seal({ payload, aad: 'tool=increase-counter' });
      assert.equal(sealed.keyId, 1);
      const opened = await client.unseal({ token: sealed.token, aad: Buffer.from('tool=increase-counter') });
      assert.ok(opened.valid);
      assert.deepEqual(opened.payload, payload);
      assert.equal(opened.keyId, 1);

      const wrongAad = await client.unseal({ token: sealed.token, aad: 'tool=other' });
      assert.deepEqual(wrongAad.valid, false);
      assert.equal(!wrongAad.valid && wrongAad.reason, 'REASON_AUTHENTICATION_FAILED');
      const tampered = await client.unseal({ token: tamper(sealed.token), aad: 'tool=increase-counter' });
      assert.equal(tampered.valid, false);

      // A sealed token is not a state token, and the other way round.
      const asState = await client.verify({ token: sealed.token, tool: 't' });
      assert.equal(!asState.valid && asState.reason, 'REASON_WRONG_KIND');
      const minted = await client.mint({ tool: 't', step: 's' });
      const asSealed = await client.unseal({ token: minted.token });
      assert.equal(!asSealed.valid && asSealed.reason, 'REASON_WRONG_KIND');
    });

    test('listKeys', async () => {
      const keys = await client.listKeys();
      assert.equal(keys.keyringGeneration, 1);
      assert.deepEqual(
        keys.keys.map((k) => [k.id, k.algorithm, k.status, k.fileStatus, k.mintFrom, k.retireAt]),
        [[1, 'ALGORITHM_XCHACHA20_POLY1305', 'KEY_STATUS_PRIMARY', 'KEY_STATUS_PRIMARY', undefined, undefined]],
      );
      // The tests before this one minted and verified under key 1.
      assert.ok(keys.keys[0].minted > 0 && keys.keys[0].verified > 0, JSON.stringify(keys.keys));
      assert.deepEqual([keys.mintingKeyId, keys.nextTransition, keys.clockLeewaySeconds, keys.maxTtlSeconds], [1, undefined, 0, 86400]);
      assert.match(keys.keyringSha256, /^[0-9a-f]{64}$/);
    });

    test('mintBatch keeps order and per-item failures', async () => {
      const results = await client.mintBatch([
        { tool: 'a', step: 's1', stateJson: '{"i":0}' },
        { tool: '', step: 's2' },
        { tool: 'c', step: 's3', state: Buffer.from([3]) },
        { tool: 'd', step: 's4', stateJson: 'not json' },
        { tool: 'e', step: 's5', context: ctxA },
      ]);
      assert.deepEqual(
        results.map((r) => r.ok),
        [true, false, true, false, true],
      );
      assert.equal(!results[1].ok && results[1].reason, 'REASON_INVALID_ARGUMENT');
      assert.equal(!results[3].ok && results[3].reason, 'REASON_INVALID_ARGUMENT');
      // Each minted token is for its own item.
      const checks = await client.verifyBatch([
        { token: results[0].ok ? results[0].token : '', tool: 'a' },
        { token: results[2].ok ? results[2].token : '', tool: 'c' },
        { token: results[4].ok ? results[4].token : '', tool: 'e', context: ctxA },
      ]);
      assert.deepEqual(
        checks.map((c) => (c.valid ? c.step : c.reason)),
        ['s1', 's3', 's5'],
      );
      assert.equal(checks[0].valid && checks[0].stateJson, '{"i":0}');
      assert.deepEqual(checks[1].valid && [...(checks[1].state ?? [])], [3]);
    });

    test('verifyBatch keeps order and per-item failures', async () => {
      const minted = await client.mintBatch(
        Array.from({ length: 6 }, (_, i) => ({ tool: 'batch', step: `s${i}`, stateJson: JSON.stringify({ i }), context: ctxA })),
      );
      const tokens = minted.map((m) => (m.ok ? m.token : assert.fail('mint failed')));
      const results = await client.verifyBatch([
        { token: tokens[0], tool: 'batch', context: ctxA },
        { token: tamper(tokens[1]), tool: 'batch', context: ctxA },
        { token: tokens[2], tool: 'other', context: ctxA },
        { token: tokens[3], tool: 'batch', context: ctxB },
        { token: tokens[4], tool: '', context: ctxA },
        { token: tokens[5], tool: 'batch', context: ctxA, expectedStep: 's5' },
        { token: tokens[5], tool: 'batch', context: ctxA, expectedStep: 's0' },
      ]);
      assert.deepEqual(
        results.map((r) => (r.valid ? `ok:${r.step}:${r.stateJson}` : r.reason)),
        [
          'ok:s0:{"i":0}',
          'REASON_AUTHENTICATION_FAILED',
          'REASON_AUTHENTICATION_FAILED',
          'REASON_AUTHENTICATION_FAILED',
          'REASON_INVALID_ARGUMENT',
          'ok:s5:{"i":5}',
          'REASON_WRONG_STEP',
        ],
      );
    });

    test('a single-use token: refused by a plain verify, consumed once, then replayed', async () => {
      const req = { tool: 'redeem', step: 'confirm', stateJson: '{"coupon":7}', context: ctxA };
      const once = await client.mint({ ...req, singleUse: true });
      const plain = await client.mint(req);
      assert.equal(once.token.length, plain.token.length + 24); // the 16-byte token id
      assert.equal(once.expiresAt - once.issuedAt, 600);

      const verify = { token: once.token, tool: 'redeem', expectedStep: 'confirm', context: ctxA };
      const peeked = await client.verify(verify);
      assert.deepEqual(peeked.valid ? 'valid' : peeked.reason, 'REASON_SINGLE_USE');
      assert.ok(!peeked.valid && peeked.detail);
      // Refused consumes (another caller, another step, altered) do not spend it.
      for (const [bad, reason] of /** @type {const} */ ([
        [{ ...verify, context: ctxB }, 'REASON_AUTHENTICATION_FAILED'],
        [{ ...verify, expectedStep: 'amount' }, 'REASON_WRONG_STEP'],
        [{ ...verify, token: tamper(once.token) }, 'REASON_AUTHENTICATION_FAILED'],
      ])) {
        const refused = await client.verify({ ...bad, consume: true });
        assert.equal(refused.valid ? 'valid' : refused.reason, reason);
      }

      const first = await client.verify({ ...verify, consume: true });
      assert.ok(first.valid);
      assert.equal(first.keyId, 1);
      assert.equal(first.step, 'confirm');
      assert.equal(first.stateJson, '{"coupon":7}');
      assert.equal(first.issuedAt, once.issuedAt);
      assert.equal(first.expiresAt, once.expiresAt);

      const second = await client.verify({ ...verify, consume: true });
      assert.equal(second.valid ? 'valid' : second.reason, 'REASON_REPLAYED');
      assert.ok(!second.valid && second.detail);
      const afterwards = await client.verify(verify);
      assert.equal(afterwards.valid ? 'valid' : afterwards.reason, 'REASON_SINGLE_USE');

      // consume is for single-use tokens only; the others keep verifying.
      const wrongKind = await client.verify({ token: plain.token, tool: 'redeem', context: ctxA, consume: true });
      assert.equal(wrongKind.valid ? 'valid' : wrongKind.reason, 'REASON_WRONG_KIND');
      assert.ok((await client.verify({ token: plain.token, tool: 'redeem', context: ctxA })).valid);
      const sealed = await client.seal({ payload: 'p' });
      const sealedConsumed = await client.verify({ token: sealed.token, tool: 'redeem', consume: true });
      assert.equal(sealedConsumed.valid ? 'valid' : sealedConsumed.reason, 'REASON_WRONG_KIND');
      const unsealed = await client.unseal({ token: once.token });
      assert.equal(unsealed.valid ? 'valid' : unsealed.reason, 'REASON_WRONG_KIND');
    });

    test('single-use in batches: the same token twice is accepted once', async () => {
      const minted = await client.mintBatch([
        { tool: 'redeem', step: 'confirm', state: 'once!', singleUse: true },
        { tool: 'redeem', step: 'confirm', state: 'often' },
      ]);
      const [once, often] = minted.map((m) => (m.ok ? m.token : assert.fail('mint failed')));
      assert.equal(once.length, often.length + 24);
      const results = await client.verifyBatch([
        { token: once, tool: 'redeem', consume: true },
        { token: once, tool: 'redeem', consume: true },
        { token: once, tool: 'redeem' },
        { token: often, tool: 'redeem', consume: true },
        { token: often, tool: 'redeem' },
      ]);
      assert.deepEqual(
        results.map((r) => (r.valid ? `ok:${r.state?.toString()}` : r.reason)),
        ['ok:once!', 'REASON_REPLAYED', 'REASON_SINGLE_USE', 'REASON_WRONG_KIND', 'ok:often'],
      );
      const { token } = await client.mint({ tool: 'redeem', step: 'confirm', singleUse: true });
      const many = await client.verifyBatch(Array.from({ length: 16 }, () => ({ token, tool: 'redeem', consume: true })));
      assert.equal(many.filter((r) => r.valid).length, 1);
      assert.deepEqual([...new Set(many.filter((r) => !r.valid).map((r) => !r.valid && r.reason))], ['REASON_REPLAYED']);
    });

    test('singleUse and consume must be booleans', async () => {
      await assert.rejects(client.mint({ tool: 't', step: 's', singleUse: /** @type {any} */ ('false') }), TypeError);
      await assert.rejects(client.verify({ token: 'x', tool: 't', consume: /** @type {any} */ (1) }), TypeError);
      await assert.rejects(client.verifyBatch([{ token: 'x', tool: 't', consume: /** @type {any} */ ('yes') }]), TypeError);
    });
  });
}

describe('a replay store that cannot record fails closed', () => {
  test('--replay-capacity 64: the extra consumes are REASON_REPLAY_STORE_FULL, never accepted', async () => {
    const full = await Sidecar.start({ args: ['--replay-capacity', '64'] });
    const client = new Client(full.unixTarget);
    try {
      const minted = await client.mintBatch(Array.from({ length: 80 }, () => ({ tool: 'redeem', step: 'confirm', singleUse: true })));
      const tokens = minted.map((m) => (m.ok ? m.token : assert.fail('mint failed')));
      const results = await client.verifyBatch(tokens.map((token) => ({ token, tool: 'redeem', consume: true })));
      const accepted = tokens.filter((_, i) => results[i].valid);
      const refused = tokens.filter((_, i) => !results[i].valid);
      assert.deepEqual([...new Set(results.filter((r) => !r.valid).map((r) => !r.valid && r.reason))], ['REASON_REPLAY_STORE_FULL']);
      assert.ok(accepted.length > 0 && accepted.length <= 64 && refused.length >= 16, `${accepted.length} accepted`);
      const again = await client.verify({ token: refused[0], tool: 'redeem', consume: true });
      assert.equal(again.valid ? 'valid' : again.reason, 'REASON_REPLAY_STORE_FULL');
      const replay = await client.verify({ token: accepted[0], tool: 'redeem', consume: true });
      assert.equal(replay.valid ? 'valid' : replay.reason, 'REASON_REPLAYED');
      const { token } = await client.mint({ tool: 't', step: 's' });
      assert.ok((await client.verify({ token, tool: 't' })).valid);
    } finally {
      client.close();
      await full.stop();
    }
  });

  test('an unreachable Redis: consumes are REASON_REPLAY_STORE_UNAVAILABLE, plain verifies work', async () => {
    const port = await freePort();
    const cutOff = await Sidecar.start({ args: ['--replay-store', `redis://127.0.0.1:${port}`, '--replay-timeout-ms', '200'] });
    const client = new Client(cutOff.unixTarget);
    try {
      const { token } = await client.mint({ tool: 'redeem', step: 'confirm', singleUse: true });
      for (let i = 0; i < 2; i++) {
        const refused = await client.verify({ token, tool: 'redeem', consume: true });
        assert.equal(refused.valid ? 'valid' : refused.reason, 'REASON_REPLAY_STORE_UNAVAILABLE');
      }
      const batch = await client.verifyBatch([{ token, tool: 'redeem', consume: true }, { token, tool: 'redeem', consume: true }]);
      assert.deepEqual(batch.map((r) => (r.valid ? 'valid' : r.reason)), ['REASON_REPLAY_STORE_UNAVAILABLE', 'REASON_REPLAY_STORE_UNAVAILABLE']);
      const plain = await client.mint({ tool: 't', step: 's' });
      assert.ok((await client.verify({ token: plain.token, tool: 't' })).valid);
    } finally {
      client.close();
      await cutOff.stop();
    }
  });
});

test('an expired token is invalid in-band (1 s TTL, no leeway)', async () => {
  const client = new Client(sidecar.unixTarget);
  try {
    const minted = await client.mint({ tool: 't', step: 's', ttlSeconds: 1, context: ctxA });
    assert.equal(minted.expiresAt - minted.issuedAt, 1);
    const fresh = await client.verify({ token: minted.token, tool: 't', context: ctxA });
    assert.equal(fresh.valid, true);
    // Wait until the wall clock is past expires_at by a whole second.
    const waitMs = (minted.expiresAt + 1) * 1000 - Date.now() + 50;
    await new Promise((r) => setTimeout(r, Math.max(0, waitMs)));
    const late = await client.verify({ token: minted.token, tool: 't', context: ctxA });
    assert.equal(late.valid, false);
    assert.equal(!late.valid && late.reason, 'REASON_EXPIRED');
  } finally {
    client.close();
  }
});

describe('with a bearer token', () => {
  /** @type {Sidecar} */
  let guarded;
  before(async () => {
    guarded = await Sidecar.start({ authToken: 's3cret-token' });
  });
  after(async () => {
    await guarded?.stop();
  });

  for (const transport of ['unix', 'tcp']) {
    test(`over ${transport}: missing or wrong token rejects UNAUTHENTICATED, the right one works`, async () => {
      const target = transport === 'unix' ? guarded.unixTarget : guarded.tcpTarget;
      const anonymous = new Client(target);
      const wrong = new Client(target, { token: 'not-it' });
      const right = new Client(target, { token: 's3cret-token' });
      try {
        for (const call of [
          () => anonymous.mint({ tool: 't', step: 's' }),
          () => anonymous.verify({ token: 'x', tool: 't' }),
          () => anonymous.listKeys(),
          () => anonymous.seal({ payload: 'p' }),
          () => wrong.mint({ tool: 't', step: 's' }),
          () => wrong.verifyBatch([]),
        ]) {
          await assert.rejects(call(), (err) => {
            assert.ok(err instanceof TransportError);
            assert.equal(err.code, status.UNAUTHENTICATED);
            assert.equal(err.codeName, 'UNAUTHENTICATED');
            return true;
          });
        }
        const minted = await right.mint({ tool: 't', step: 's', stateJson: '{"ok":true}' });
        const verified = await right.verify({ token: minted.token, tool: 't' });
        assert.ok(verified.valid);
        assert.equal(verified.stateJson, '{"ok":true}');
      } finally {
        anonymous.close();
        wrong.close();
        right.close();
      }
    });
  }
});

describe('an unreachable sidecar', () => {
  test('a Unix socket that does not exist rejects with TransportError UNAVAILABLE', async () => {
    const client = new Client(`unix://${path.join(sidecar.dir, 'nobody-here.sock')}`, { deadlineMs: 3000 });
    try {
      await assert.rejects(client.mint({ tool: 't', step: 's' }), (err) => {
        assert.ok(err instanceof TransportError);
        assert.equal(err.code, status.UNAVAILABLE);
        return true;
      });
    } finally {
      client.close();
    }
  });

  test('a TCP port nobody listens on rejects with TransportError', async () => {
    const client = new Client(`127.0.0.1:${await freePort()}`, { deadlineMs: 3000 });
    try {
      await assert.rejects(client.verify({ token: 'x', tool: 't' }), (err) => {
        assert.ok(err instanceof TransportError);
        assert.ok([status.UNAVAILABLE, status.DEADLINE_EXCEEDED].includes(err.code), `code ${err.codeName}`);
        return true;
      });
    } finally {
      client.close();
    }
  });

  test('a closed client rejects with TransportError', async () => {
    const client = new Client(sidecar.unixTarget);
    assert.equal((await client.listKeys()).keys.length, 1);
    client.close();
    await assert.rejects(client.mint({ tool: 't', step: 's' }), TransportError);
  });

  test('a sidecar that went away: calls reject with TransportError', async () => {
    const gone = await Sidecar.start();
    const client = new Client(gone.unixTarget, { deadlineMs: 3000 });
    try {
      assert.equal((await client.listKeys()).keys.length, 1);
      await gone.stop();
      await assert.rejects(client.listKeys(), TransportError);
    } finally {
      client.close();
      await gone.stop();
    }
  });
});

test('the shipped proto is identical to the repository proto', () => {
  const shipped = readFileSync(new URL('../proto/reqstate/v1/reqstate.proto', import.meta.url));
  const source = readFileSync(path.join(REPO, 'proto/reqstate/v1/reqstate.proto'));
  assert.ok(
    shipped.equals(source),
    'clients/node/proto/reqstate/v1/reqstate.proto differs from proto/reqstate/v1/reqstate.proto: copy it over',
  );
});
