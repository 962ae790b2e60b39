// The vector suite, runtime-agnostic (no Node, Deno, Bun or Worker API):
// every kind of tests/vectors/v1.json in both directions, and the call
// context corpus tests/vectors/call_context.json. The drivers (node --test,
// Deno, Bun, workerd) hand it the files' text and the package's module, and
// fail unless every check passed and the expected number ran.

/** JSON.parse, keeping integers of 16 digits or more exact (as strings). */
export function parseJsonBig(text) {
  return JSON.parse(text.replace(/([:\[,]\s*)(\d{16,})(?=\s*[,}\]])/g, '$1"$2"'));
}

const hex = (s) => {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
};
const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

function fixedRandom(hexBytes) {
  let buf = hex(hexBytes);
  const random = (n) => {
    if (n > buf.length) throw new Error(`random source asked for ${n} bytes, has ${buf.length}`);
    const out = buf.slice(0, n);
    buf = buf.slice(n);
    return out;
  };
  random.remaining = () => buf.length;
  return random;
}

/**
 * Runs everything. Returns { passed, failures: [{ name, error }], counts }.
 * @param {any} lib the @reqstate/codec module
 * @param {string} vectorsText tests/vectors/v1.json
 * @param {string} callContextText tests/vectors/call_context.json
 */
export function runSuite(lib, vectorsText, callContextText) {
  const { Codec, Keyring, Policy, callContext, canonicalJson, ReqstateError, InvalidArgumentsError, MemoryReplayStore } = lib;
  const V = parseJsonBig(vectorsText);
  const C = JSON.parse(callContextText);
  let passed = 0;
  const failures = [];
  const counts = {};
  const check = (group, name, fn) => {
    counts[group] = (counts[group] ?? 0) + 1;
    try {
      fn();
      passed++;
    } catch (e) {
      failures.push({ name: `${group}: ${name}`, error: String(e && e.stack ? e.stack : e) });
    }
  };
  const eq = (a, b, what) => {
    if (a !== b) throw new Error(`${what}: got ${String(a)}, want ${String(b)}`);
  };
  const refuses = (fn, reason) => {
    try {
      fn();
    } catch (e) {
      if (!(e instanceof ReqstateError)) throw new Error(`threw a non-ReqstateError: ${e}`);
      eq(e.reason, reason, 'reason');
      return e;
    }
    throw new Error(`accepted; want ${reason}`);
  };

  const specs = new Map(V.keys.map((k) => [k.id, k]));
  const keyring = Keyring.fromKeys(V.keys.map((k) => ({ id: k.id, algorithm: k.algorithm, status: k.status, secret: k.secret })));
  const onlyPrimary = (id) => {
    const k = specs.get(id);
    return Keyring.fromKeys([{ id, algorithm: k.algorithm, status: 'primary', secret: k.secret }]);
  };
  const policyOf = (v) => {
    const p = v.policy ?? V.policy;
    return new Policy({ maxTokenLen: p.max_token_len, clockLeeway: p.clock_leeway, maxLifetime: p.max_lifetime });
  };
  const codecAt = (kr, v, now, random) => new Codec({ keyring: kr, policy: policyOf(v), clock: () => BigInt(now), random: random ?? (() => { throw new Error('no randomness in this test'); }) });
  const decoders = { uint: (b) => { if (b.length === 0 || b[0] >> 5 !== 0 || (b[0] & 31) > 27) throw new Error('not a uint'); const n = (b[0] & 31) < 24 ? 1 : 1 + (1 << ((b[0] & 31) - 24)); if (n !== b.length) throw new Error('not one uint'); return 0; } };
  // The vectors' store (FORMAT.md §5.1 names): `spent` are live records.
  const U64 = (1n << 64n) - 1n;
  const namedStore = (names) => {
    const records = new Map((names ?? []).map((n) => [n, U64]));
    return {
      records,
      // Kept until the verifier's window ends (record_until: expires_at + clock_leeway), as the vectors say.
      insertIfAbsent({ id, now, validUntil }) {
        const held = records.get(id.name);
        if (held !== undefined && held > now) return false;
        records.set(id.name, validUntil);
        return true;
      },
    };
  };
  const show = (records) => [...records].map(([n, u]) => `${n}=${u}`).sort().join(',');
  const runVerify = (v) => {
    const codec = codecAt(keyring, v, v.now);
    if (v.operation === 'consume') {
      const store = namedStore(v.spent);
      const before = show(store.records);
      try {
        const got = codec.consumeSync(v.token, { tool: v.tool, context: hex(v.context), expectedStep: v.expected_step, decode: v.decode_as ? decoders[v.decode_as] : false }, store);
        return { got, before, after: show(store.records) };
      } catch (e) {
        eq(show(store.records), before, 'a refused consume changed the store');
        throw e;
      }
    }
    if (v.operation === 'verify') {
      return codec.verify(v.token, { tool: v.tool, context: hex(v.context), expectedStep: v.expected_step, decode: v.decode_as ? decoders[v.decode_as] : false });
    }
    if (v.operation === 'unseal') return codec.unseal(v.token, hex(v.context));
    throw new Error(`unknown operation ${v.operation}`);
  };

  check('meta', 'format version and default policy', () => {
    eq(V.format_version, 1, 'format_version');
    const p = new Policy();
    eq(`${p.maxTokenLen},${p.clockLeeway},${p.maxLifetime}`, `${V.policy.max_token_len},${V.policy.clock_leeway},${V.policy.max_lifetime}`, 'defaults');
  });
  for (const k of V.keys) {
    check('keys', `derived key ${k.id}`, () => {
      const key = keyring.get(k.id);
      eq(toHex(key.workingKey), k.derived_key, 'derived_key');
      eq(key.nonceKey ? toHex(key.nonceKey) : '', k.nonce_key, 'nonce_key');
    });
  }
  for (const v of V.valid) {
    check('valid', `${v.name}: verifies`, () => {
      const got = codecAt(keyring, v, v.now).verify(v.token, { tool: v.tool, context: hex(v.context), expectedStep: v.step, decode: false });
      eq(got.step, v.step, 'step');
      eq(toHex(got.stateCbor), v.state_cbor, 'state');
      eq(String(got.issuedAtBig), String(v.issued_at), 'issued_at');
      eq(String(got.expiresAtBig), String(v.expires_at), 'expires_at');
      eq(got.keyId, v.key_id, 'key_id');
      eq(v.token.length, v.token_chars, 'token_chars');
    });
    check('valid', `${v.name}: reminted byte for byte`, () => {
      const random = fixedRandom(v.random);
      const m = codecAt(onlyPrimary(v.key_id), v, v.now, random).mintExact({ tool: v.tool, step: v.step, stateCbor: hex(v.state_cbor), ttl: Number(v.ttl), context: hex(v.context) });
      eq(m.token, v.token, 'token');
      eq(random.remaining(), 0, 'random bytes left');
    });
    check('valid', `${v.name}: clock boundaries`, () => {
      const leeway = BigInt(policyOf(v).clockLeeway);
      const max = (1n << 64n) - 1n;
      const exp = BigInt(v.expires_at) + leeway > max ? max : BigInt(v.expires_at) + leeway;
      const args = { tool: v.tool, context: hex(v.context), decode: false };
      codecAt(keyring, v, exp - 1n).verify(v.token, args);
      refuses(() => codecAt(keyring, v, exp).verify(v.token, args), 'expired');
      const first = BigInt(v.issued_at) - leeway;
      codecAt(keyring, v, first).verify(v.token, args);
      if (first > 0n) refuses(() => codecAt(keyring, v, first - 1n).verify(v.token, args), 'not_yet_valid');
    });
  }
  for (const v of V.sealed) {
    check('sealed', `${v.name}: unseals`, () => {
      const got = codecAt(keyring, v, v.now).unseal(v.token, hex(v.aad));
      eq(toHex(got.payload), v.payload, 'payload');
      eq(got.keyId, v.key_id, 'key_id');
    });
    check('sealed', `${v.name}: resealed byte for byte`, () => {
      const random = fixedRandom(v.random);
      eq(codecAt(onlyPrimary(v.key_id), v, v.now, random).seal(hex(v.payload), hex(v.aad)).token, v.token, 'token');
      eq(random.remaining(), 0, 'random bytes left');
    });
  }
  for (const v of V.single_use) {
    const args = { tool: v.tool, context: hex(v.context), expectedStep: v.step, decode: false };
    check('single_use', `${v.name}: reminted byte for byte (token id, then r)`, () => {
      eq(hex(v.token_id).length, 16, 'token id length');
      const random = fixedRandom(v.token_id + v.random);
      const m = codecAt(onlyPrimary(v.key_id), v, v.now, random).mintSingleUseExact({ tool: v.tool, step: v.step, stateCbor: hex(v.state_cbor), ttl: Number(v.ttl), context: hex(v.context) });
      eq(m.token, v.token, 'token');
      eq(m.token.length, v.token_chars, 'token_chars');
      eq(random.remaining(), 0, 'random bytes left');
    });
    check('single_use', `${v.name}: consumed once, then replayed; never verified`, () => {
      const codec = codecAt(keyring, v, v.now);
      refuses(() => codec.verify(v.token, args), 'single_use');
      const store = namedStore([]);
      const got = codec.consumeSync(v.token, args, store);
      eq(`${got.issuedAtBig}|${got.expiresAtBig}|${got.step}|${toHex(got.stateCbor)}|${got.keyId}`, `${v.issued_at}|${v.expires_at}|${v.step}|${v.state_cbor}|${v.key_id}`, 'claims');
      eq(show(store.records), `${v.spent_record}=${v.record_until}`, 'records');
      refuses(() => codec.consumeSync(v.token, args, store), 'replayed');
    });
    check('single_use', `${v.name}: the redemption and the memory store`, () => {
      const codec = codecAt(keyring, v, v.now);
      const r = codec.verifySingleUse(v.token, args);
      eq(r.spentId.name, v.spent_record, 'record name');
      eq(toHex(r.spentId.tokenId), v.token_id, 'token id');
      eq(r.spentId.keyId, v.key_id, 'key id');
      eq(String(r.recordUntil), String(v.record_until), 'record_until');
      const memory = new MemoryReplayStore({ capacity: 4 });
      eq(toHex(codec.consumeSync(v.token, args, memory).stateCbor), v.state_cbor, 'state');
      refuses(() => codec.consumeSync(v.token, args, memory), 'replayed');
    });
  }
  for (const v of V.invalid) {
    check('invalid', v.name, () => refuses(() => runVerify(v), v.expect_fail));
  }
  for (const v of V.accepted) {
    check('accepted', v.name, () => {
      if (v.operation === 'consume') {
        const { got, before, after } = runVerify(v);
        eq(`${got.issuedAtBig}|${got.expiresAtBig}|${got.step}|${toHex(got.stateCbor)}|${got.keyId}`, `${v.issued_at}|${v.expires_at}|${v.step}|${v.state_cbor}|${v.key_id}`, 'claims');
        const want = namedStore(v.spent);
        want.records.set(v.spent_record, BigInt(v.record_until));
        eq(after, show(want.records), 'records after');
        if (before.includes(v.spent_record)) throw new Error('spent_record was in the store before');
        return;
      }
      const got = runVerify(v);
      if (v.operation === 'unseal') return eq(toHex(got.payload), v.payload, 'payload');
      eq(`${got.issuedAtBig}|${got.expiresAtBig}|${got.step}|${toHex(got.stateCbor)}`, `${v.issued_at}|${v.expires_at}|${v.step}|${v.state_cbor}`, 'claims');
    });
  }
  for (const v of V.mint_invalid) {
    check('mint_invalid', v.name, () => {
      const codec = codecAt(onlyPrimary(v.key_id), v, v.now, fixedRandom(v.random));
      refuses(() => {
        const options = { tool: v.tool, step: v.step, stateCbor: hex(v.state_cbor), ttl: Number(v.ttl), context: hex(v.context) };
        if (v.operation === 'mint') (v.single_use ? codec.mintSingleUseExact(options) : codec.mintExact(options));
        else if (v.operation === 'seal') codec.seal(hex(v.payload), hex(v.context));
        else throw new Error(`unknown operation ${v.operation}`);
      }, v.expect_fail);
    });
  }
  // A keyring vector as the keyring file it stands for (docs/KEYRING.md):
  // JSON strings are TOML basic strings, `created` (and a schedule's
  // `mint_from` and `retire_at`) are written bare.
  const BARE = ['created', 'mint_from', 'retire_at'];
  const keyringToml = (v) => {
    let out = v.version === undefined ? '' : `version = ${v.version}\n`;
    for (const k of v.keys) {
      out += `\n[[key]]\n`;
      for (const [field, value] of Object.entries(k)) {
        out += `${field} = ${BARE.includes(field) || typeof value !== 'string' ? value : JSON.stringify(value)}\n`;
      }
    }
    return out;
  };
  for (const v of V.keyrings) {
    check('keyrings', v.name, () => {
      const build = () => Keyring.fromToml(keyringToml(v));
      if (v.expect_fail !== undefined) return refuses(build, v.expect_fail);
      const m = v.mint;
      const codec = new Codec({ keyring: build(), policy: new Policy(), clock: () => BigInt(m.now) });
      const args = { tool: m.tool, context: hex(m.context), decode: false };
      const got = codec.verify(m.token, args);
      eq(got.keyId, m.key_id, 'key_id of the token');
      eq(got.step, m.step, 'step');
      eq(toHex(got.stateCbor), m.state_cbor, 'state');
      const mine = codec.mintExact({ tool: m.tool, step: m.step, stateCbor: hex(m.state_cbor), ttl: m.ttl, context: hex(m.context) });
      eq(codec.verify(mine.token, args).keyId, m.key_id, 'key_id minted with');
      if (m.deterministic) eq(mine.token, m.token, 'token');
    });
  }
  // Keys on a schedule (docs/KEYRING.md): the file is loaded and checked
  // against the vector's policy by the Codec that serves it; then, at each
  // instant, the minting key, its token, and which keys' tokens verify.
  const schedulePolicy = (v) => new Policy({ maxTokenLen: v.policy.max_token_len, clockLeeway: v.policy.clock_leeway, maxLifetime: v.policy.max_lifetime });
  for (const v of V.schedules) {
    if (v.expect_fail !== undefined) {
      check('schedules', `${v.name}: refused`, () => {
        const e = refuses(() => new Codec({ keyring: Keyring.fromToml(keyringToml(v)), policy: schedulePolicy(v) }), v.expect_fail);
        for (const k of v.keys) if (e.message.includes(k.secret)) throw new Error('the message shows a secret');
      });
      continue;
    }
    for (const at of v.at) {
      check('schedules', `${v.name}: at ${at.now}`, () => {
        const c = v.claims;
        const codec = new Codec({ keyring: Keyring.fromToml(keyringToml(v)), policy: schedulePolicy(v), clock: () => BigInt(at.now) });
        eq(codec.keyring.mintingKey(BigInt(at.now)).id, at.minting, 'minting key');
        const args = { tool: c.tool, context: hex(c.context), decode: false };
        const mine = codec.mintExact({ tool: c.tool, step: c.step, stateCbor: hex(c.state_cbor), ttl: c.ttl, context: hex(c.context) });
        eq(mine.keyId, at.minting, 'key_id minted with');
        if (at.deterministic) eq(mine.token, at.token, 'token');
        eq(codec.verify(mine.token, args).keyId, at.minting, 'key_id of the token minted here');
        // Single-use tokens and sealed payloads: minted by the same key.
        eq(codec.mintSingleUseExact({ tool: c.tool, step: c.step, stateCbor: hex(c.state_cbor), ttl: c.ttl, context: hex(c.context) }).keyId, at.minting, 'key_id of a single-use token');
        eq(codec.seal(hex(c.state_cbor), hex(c.context)).keyId, at.minting, 'key_id of a sealed payload');
        const got = codec.verify(at.token, args);
        eq(got.keyId, at.minting, 'key_id of token');
        eq(`${got.step}|${toHex(got.stateCbor)}|${got.issuedAtBig}`, `${c.step}|${c.state_cbor}|${at.now}`, 'claims of token');
        for (const t of at.tokens) {
          if (t.result === 'ok') eq(codec.verify(t.token, args).keyId, t.key_id, `key ${t.key_id}'s token`);
          else refuses(() => codec.verify(t.token, args), t.result);
          for (const o of t.others ?? []) {
            const run = () => {
              if (o.operation === 'verify') return codec.verify(o.token, args);
              if (o.operation === 'consume') return codec.consumeSync(o.token, args, new MemoryReplayStore());
              if (o.operation === 'unseal') return codec.unseal(o.token, hex(c.context));
              throw new Error(`unknown operation ${o.operation}`);
            };
            if (o.result === 'ok') eq(run().keyId, t.key_id, `key ${t.key_id}: ${o.what}`);
            else refuses(run, o.result);
          }
        }
      });
    }
  }
  // Keyring files as TOML texts (docs/KEYRING.md, "How an instant is read"), through this package's own TOML reader.
  for (const v of V.keyring_texts) {
    if (v.expect_fail !== undefined) {
      check('keyring_texts', `${v.name}: refused`, () => refuses(() => Keyring.fromToml(v.toml), v.expect_fail));
      continue;
    }
    for (const at of v.at) {
      check('keyring_texts', `${v.name}: at ${at.now}`, () => {
        const keyring = Keyring.fromToml(v.toml);
        eq(keyring.mintingKey(at.now).id, at.minting, 'minting key');
        const ids = [1, 2, 3, 4, 5, 6, 7, 8].map((id) => keyring.get(id)).filter((k) => k !== undefined);
        eq(ids.filter((k) => !k.isRetiredAt(at.now)).map((k) => k.id).join(','), at.verifying.join(','), 'keys not retired');
      });
    }
  }
  for (const v of V.policies) {
    check('policies', v.name, () => {
      const p = v.policy;
      const build = () => new Policy({ maxTokenLen: p.max_token_len, clockLeeway: p.clock_leeway, maxLifetime: p.max_lifetime });
      if (v.expect_fail !== undefined) return refuses(build, v.expect_fail);
      const q = build();
      const b = v.built;
      eq(`${q.maxTokenLen},${q.clockLeeway},${q.maxLifetime}`, `${b.max_token_len},${b.clock_leeway},${b.max_lifetime}`, 'policy');
    });
  }
  for (const c of C.cases) {
    check('call_context', c.name, () => {
      const parts = { principal: c.principal, audience: c.audience, method: c.method, argumentsJson: c.arguments_json };
      if (c.refused || c.reason) {
        const e = refuses(() => callContext(parts), 'invalid_argument');
        if (!(e instanceof InvalidArgumentsError)) throw new Error('not an InvalidArgumentsError');
        eq(e.rule, c.reason, 'rule');
        refuses(() => canonicalJson(c.arguments_json), 'invalid_argument');
      } else {
        eq(canonicalJson(c.arguments_json), c.canonical, 'canonical');
        eq(toHex(callContext(parts)), c.context, 'context');
      }
    });
  }
  for (const section of Object.keys(V)) {
    // `shared_lifetimes` is the Redis store's rule (@reqstate/codec/redis, Node only): run by test/redisrule.test.js.
    if (!['description', 'format_version', 'policy', 'keys', 'valid', 'sealed', 'single_use', 'accepted', 'invalid', 'mint_invalid', 'keyrings', 'schedules', 'keyring_texts', 'policies', 'shared_lifetimes'].includes(section)) {
      failures.push({ name: 'suite', error: `v1.json has a section ${section} this suite does not run` });
    }
  }
  const expected = 1 + V.keys.length + 3 * V.valid.length + 3 * V.single_use.length + 2 * V.sealed.length + V.invalid.length + V.accepted.length + V.mint_invalid.length + V.keyrings.length + V.schedules.reduce((n, v) => n + (v.at?.length ?? 1), 0) + V.keyring_texts.reduce((n, v) => n + (v.at?.length ?? 1), 0) + V.policies.length + C.cases.length;
  if (passed + failures.length !== expected) failures.push({ name: 'suite', error: `ran ${passed + failures.length} checks, expected ${expected}` });
  return { passed, failures, counts, expected };
}
