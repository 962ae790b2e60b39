// `reqstate-ts keys new` (issue 40 item 5): a fresh key in the compact keyring
// form (docs/KEYRING.md) that the README's REQSTATE_KEYS lines read, from the
// platform's CSPRNG; what it prints loads in the codec and its tokens verify
// in the Rust CLI; every bad flag is a usage error (exit 64).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Codec, Keyring } from '../dist/index.js';
import { RUST, TS, keyringFile, requireBinary, run } from './support/rust.js';

const ENTRY = /^(\d+):(primary|active):(xchacha20-poly1305|hmac-sha256):([A-Za-z0-9+/]+={0,2})\n$/;

describe('reqstate-ts keys new', () => {
  test('prints a whole keyring of one fresh primary key, different every run, that the codec and the Rust CLI use', async () => {
    requireBinary();
    const [a, b] = [await run(TS, ['keys', 'new']), await run(TS, ['keys', 'new'])];
    for (const r of [a, b]) {
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '');
    }
    const [, id, status, algorithm, secret] = a.stdout.match(ENTRY) ?? assert.fail(`not a compact entry: ${a.stdout}`);
    assert.deepEqual([id, status, algorithm, Buffer.from(secret, 'base64').length], ['1', 'primary', 'xchacha20-poly1305', 32]);
    assert.notEqual(a.stdout, b.stdout, 'two runs print two keys');
    assert.notEqual(Buffer.from(secret, 'base64').toString('hex'), '00'.repeat(32));

    const codec = new Codec({ keyring: a.stdout });
    const { token } = codec.mint({ tool: 'increase-counter', step: 'confirm', state: { n: 1 } });
    const kr = keyringFile(`[[key]]\nid = ${id}\nalgorithm = "${algorithm}"\nstatus = "primary"\nsecret = "${secret}"\n`);
    try {
      const v = await run(RUST, ['verify', '--keyring', kr.file, '--tool', 'increase-counter', token]);
      assert.deepEqual([v.code, v.json?.valid, v.json?.step, v.json?.key_id], [0, true, 'confirm', 1], v.stdout + v.stderr);
      // And another key's value does not verify it.
      const other = new Codec({ keyring: b.stdout });
      assert.throws(() => other.verify(token, { tool: 'increase-counter' }), (e) => e.reason === 'authentication_failed');
    } finally {
      kr.cleanup();
    }
  });

  test('--id, --status active, --algorithm and --secret-bytes: a key to append to a keyring for a rotation', async () => {
    const primary = await run(TS, ['keys', 'new']);
    const next = await run(TS, ['keys', 'new', '--id', '2', '--status', 'active', '--algorithm', 'hmac-sha256', '--secret-bytes', '1024']);
    assert.equal(next.code, 0, next.stderr);
    const [, id, status, algorithm, secret] = next.stdout.match(ENTRY) ?? assert.fail(next.stdout);
    assert.deepEqual([id, status, algorithm, Buffer.from(secret, 'base64').length], ['2', 'active', 'hmac-sha256', 1024]);
    const keyring = Keyring.parse(`${primary.stdout.trim()},${next.stdout.trim()}`);
    assert.deepEqual(keyring.mintOrder.map((k) => k.id), [1]);
    assert.equal(keyring.mintingKey(0).id, 1);
    // The appended key verifies what it minted elsewhere (as a primary of its own).
    const minted = new Codec({ keyring: next.stdout.replace(':active:', ':primary:') }).mint({ tool: 't', step: 's' }).token;
    assert.equal(new Codec({ keyring }).verify(minted, { tool: 't' }).keyId, 2);
    assert.equal((await run(TS, ['keys', 'new', '--id', '4294967295'])).code, 0);
    assert.equal((await run(TS, ['keys', 'new', '--id', '0'])).stdout.split(':')[0], '0');
  });

  for (const [args, message] of [
    [['--id', '4294967296'], /--id must be a key id in 0..=4294967295/],
    [['--id', '01'], /without leading zeros/],
    [['--id', '-1'], /unknown flag -1|--id/],
    [['--status', 'retired'], /--status must be primary .* or active/],
    [['--algorithm', 'aes-gcm'], /--algorithm must be xchacha20-poly1305 or hmac-sha256/],
    [['--secret-bytes', '31'], /--secret-bytes must be in 32..=1024/],
    [['--secret-bytes', '1025'], /--secret-bytes must be in 32..=1024/],
    [['extra'], /keys new takes no positional argument/],
    [['--keyring', 'x'], /unknown flag --keyring/],
  ]) {
    test(`keys new ${args.join(' ')}: exit 64, says what to give`, async () => {
      const r = await run(TS, ['keys', 'new', ...args]);
      assert.equal(r.code, 64, r.stdout);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, message);
    });
  }

  test('keys without new, or another subcommand: exit 64 naming keys new', async () => {
    for (const args of [['keys'], ['keys', 'init'], ['keys', 'rotate']]) {
      const r = await run(TS, args);
      assert.equal(r.code, 64);
      assert.match(r.stderr, /keys new/);
    }
    const help = await run(TS, ['--help']);
    assert.match(help.stdout, /reqstate-ts keys new/);
  });
});
