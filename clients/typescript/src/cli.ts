#!/usr/bin/env node
// reqstate-ts: the shared command line of docs/CLI.md (`mint`, `verify`) on
// @reqstate/codec. Node only (files, stdin, exit codes); the library is not.
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { base64Encode, fromHex, isWellFormed, toHex, utf8 } from './bytes.js';
import { Codec, Policy, type Redemption, type Verified } from './codec.js';
import { ReqstateError } from './errors.js';
import { Keyring } from './keyring.js';
import { createRedisReplayStore, redactRedisUrl, type RedisReplayStore } from './redis.js';
import { MemoryReplayStore, ReplayStoreError, storeRefusal } from './singleuse.js';
import { UsageError, checkPreferredCbor, stateJsonToCbor, stateToJson } from './statejson.js';
import './toml.js'; // TOML keyrings (--keyring FILE)

const U64_MAX = (1n << 64n) - 1n;

const COMMON = ['keyring', 'tool', 'context', 'context-hex', 'context-file', 'now', 'max-token-len', 'clock-leeway', 'max-lifetime'];
const VALUE_FLAGS: Record<string, string[]> = {
  mint: [...COMMON, 'step', 'state-json', 'state-cbor-hex', 'ttl'],
  verify: [...COMMON, 'expected-step', 'token', 'replay-store', 'replay-key-prefix', 'replay-timeout-ms', 'replay-max-skew-ms'],
  'keys new': ['id', 'status', 'algorithm', 'secret-bytes'],
};
const COMMON_SWITCHES = ['allow-insecure-keyring-permissions', 'help'];
const SWITCHES: Record<string, string[]> = {
  mint: [...COMMON_SWITCHES, 'single-use'],
  verify: [...COMMON_SWITCHES, 'consume'],
  'keys new': ['help'],
};

const HELP = `reqstate-ts: mint and verify reqstate requestState tokens (docs/CLI.md)

usage:
  reqstate-ts mint --keyring FILE --tool TEXT --step TEXT
                   [--state-json JSON | --state-cbor-hex HEX] [--ttl SECONDS]
                   [--single-use]
                   [--context TEXT | --context-hex HEX | --context-file FILE]
                   [--now UNIX_SECONDS] [policy flags]
  reqstate-ts verify --keyring FILE --tool TEXT [--expected-step TEXT] [--consume [replay flags]]
                   [--context TEXT | --context-hex HEX | --context-file FILE]
                   [--now UNIX_SECONDS] [policy flags] (TOKEN | --token TOKEN)
  reqstate-ts keys new [--id N] [--status primary|active] [--algorithm xchacha20-poly1305|hmac-sha256]
                   [--secret-bytes N]

policy flags: --max-token-len CHARS (64-1048576, 8192)  --clock-leeway SECONDS (0-600, 60)
              --max-lifetime SECONDS (1-2592000, 86400)  --allow-insecure-keyring-permissions
TOKEN "-" reads the token from standard input.
--single-use mints a single-use token (FORMAT.md §5.1), which only verify --consume accepts;
--consume checks a single-use token as a consuming verifier does, with a spent-token record
that lives for this one run (it checks single use, it does not enforce it across runs), or,
with --replay-store, in Redis (>= 7.0) under the rule every reqstate store shares:
replay flags: --replay-store URL (redis://[user:password@]host:port[/db], rediss://..., or
                unix://[user:password@]/path/redis.sock)
              --replay-key-prefix P (reqstate:)  --replay-timeout-ms N (1-60000, 1000)
              --replay-max-skew-ms N (1-60000, 2000)
keys new prints a fresh key in the compact keyring form (docs/KEYRING.md), e.g. for REQSTATE_KEYS
or a Worker secret: \`1:primary:xchacha20-poly1305:<base64 of 32 random bytes>\`, a whole keyring
(defaults: --id 1, --status primary, --algorithm xchacha20-poly1305, --secret-bytes 32, 32-1024).
For a rotation, print the next key with --status active and append it after a comma.
exit codes: 0 minted / verified / printed; 1 refused (JSON with "reason"); 64 usage or configuration error.
`;

function usage(message: string): never {
  throw new UsageError(message);
}

interface Parsed {
  flags: Map<string, string>;
  switches: Set<string>;
  positional: string[];
}

function parseArgs(command: string, argv: string[]): Parsed {
  const values = VALUE_FLAGS[command];
  const flags = new Map<string, string>();
  const switches = new Set<string>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      if (values.includes(name)) {
        if (flags.has(name)) usage(`--${name} given twice`);
        let v: string;
        if (eq >= 0) v = a.slice(eq + 1);
        else {
          if (i + 1 >= argv.length) usage(`--${name} needs a value`);
          v = argv[++i];
        }
        flags.set(name, v);
      } else if (SWITCHES[command].includes(name)) {
        if (eq >= 0) usage(`--${name} takes no value`);
        if (switches.has(name)) usage(`--${name} given twice`);
        switches.add(name);
      } else usage(`unknown flag --${name.replace(/[^\x20-\x7e]/g, '?')}`);
    } else if (a.startsWith('-') && a !== '-') {
      usage(`unknown flag ${a.replace(/[^\x20-\x7e]/g, '?')}`);
    } else positional.push(a);
  }
  for (const v of [...flags.values(), ...positional]) if (!isWellFormed(v)) usage('an argument is not valid UTF-8');
  return { flags, switches, positional };
}

function uint(text: string, name: string): bigint {
  if (!/^[0-9]+$/.test(text)) usage(`--${name} must be an unsigned decimal integer`);
  const v = BigInt(text);
  if (v > U64_MAX) usage(`--${name} is out of range`);
  return v;
}

function ranged(p: Parsed, name: string, lo: number, hi: number): number | undefined {
  const t = p.flags.get(name);
  if (t === undefined) return undefined;
  const v = uint(t, name);
  if (v < BigInt(lo) || v > BigInt(hi)) usage(`--${name} must be in ${lo}..=${hi}`);
  return Number(v);
}

function hexArg(text: string, name: string): Uint8Array {
  const b = fromHex(text);
  if (b === undefined) usage(`--${name} is not hex (an even number of 0-9a-f digits)`);
  return b;
}

/** The file checks of docs/KEYRING.md (on the opened file): owner, mode. Directories are not checked here. */
function checkOwnerAndMode(st: { uid: number; mode: number }, what: string, allowInsecure: boolean): void {
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0) usage(`${what}: owned by uid ${st.uid}, not by this user (uid ${uid}) or root; whoever owns it can inject keys`);
  const mode = st.mode & 0o777;
  if (mode & 0o022) usage(`${what}: mode 0${mode.toString(8)} lets group or others write it; run \`chmod 600\` on it`);
  if (mode & 0o077 && !allowInsecure) usage(`${what}: mode 0${mode.toString(8)} lets group or others read it; run \`chmod 600\` on it (or pass --allow-insecure-keyring-permissions)`);
}

/** Reads the keyring file with the ownership and permission checks of docs/KEYRING.md (the file itself). */
function loadKeyring(path: string, allowInsecure: boolean): Keyring {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    usage(`keyring ${path}: cannot open: ${(e as Error).message}`);
  }
  let text: string;
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) usage(`keyring ${path}: not a regular file`);
    if (st.size > 1 << 20) usage(`keyring ${path}: larger than 1 MiB`);
    checkOwnerAndMode(st, `keyring ${path}`, allowInsecure);
    const buf = Buffer.alloc(st.size);
    let off = 0;
    while (off < st.size) {
      const n = readSync(fd, buf, off, st.size - off, off);
      if (n === 0) break;
      off += n;
    }
    const decoded = new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, off));
    text = decoded;
  } catch (e) {
    if (e instanceof UsageError) throw e;
    usage(`keyring ${path}: cannot read: ${(e as Error).message}`);
  } finally {
    closeSync(fd);
  }
  try {
    return Keyring.fromToml(text, {
      baseDir: dirname(resolve(path)),
      env: process.env,
      readFile: (p) => {
        const f = openSync(p, constants.O_RDONLY | constants.O_NONBLOCK);
        try {
          const st = fstatSync(f);
          if (!st.isFile()) throw new Error('not a regular file');
          if (st.size > 4096) throw new Error('larger than 4096 bytes');
          checkOwnerAndMode(st, `keyring ${path}: secret_file`, allowInsecure);
          return readFileSync(f, 'utf8');
        } finally {
          closeSync(f);
        }
      },
    });
  } catch (e) {
    if (e instanceof ReqstateError) usage(`keyring ${path}: ${e.message}`);
    throw e;
  }
}

function context(p: Parsed): Uint8Array {
  const given = ['context', 'context-hex', 'context-file'].filter((f) => p.flags.has(f));
  if (given.length > 1) usage('give at most one of --context, --context-hex, --context-file');
  if (p.flags.has('context')) return utf8(p.flags.get('context')!);
  if (p.flags.has('context-hex')) return hexArg(p.flags.get('context-hex')!, 'context-hex');
  if (p.flags.has('context-file')) {
    try {
      return new Uint8Array(readFileSync(p.flags.get('context-file')!));
    } catch (e) {
      usage(`--context-file: cannot read: ${(e as Error).message}`);
    }
  }
  return new Uint8Array(0);
}

function setup(p: Parsed) {
  const keyringPath = p.flags.get('keyring');
  if (keyringPath === undefined) usage('--keyring FILE is required');
  if (!p.flags.has('tool')) usage('--tool TEXT is required');
  const now = p.flags.has('now') ? uint(p.flags.get('now')!, 'now') : undefined;
  const policy = new Policy({
    maxTokenLen: ranged(p, 'max-token-len', 64, 1048576),
    clockLeeway: ranged(p, 'clock-leeway', 0, 600),
    maxLifetime: ranged(p, 'max-lifetime', 1, 2592000),
  });
  const ctx = context(p);
  const keyring = loadKeyring(keyringPath, p.switches.has('allow-insecure-keyring-permissions'));
  let codec: Codec;
  try {
    // Checks the keyring's schedule against this policy (docs/KEYRING.md, "Keys on a schedule").
    codec = new Codec({ keyring, policy, clock: now === undefined ? undefined : () => now });
  } catch (e) {
    if (e instanceof ReqstateError && e.reason === 'invalid_keyring') usage(`keyring ${keyringPath}: ${e.message}`);
    throw e;
  }
  return { codec, ctx, tool: p.flags.get('tool')! };
}

function print(line: string) {
  process.stdout.write(`${line}\n`);
}

function mint(p: Parsed): number {
  if (p.positional.length > 0) usage('mint takes no positional argument');
  if (!p.flags.has('step')) usage('--step TEXT is required');
  if (p.flags.has('state-json') && p.flags.has('state-cbor-hex')) usage('give --state-json or --state-cbor-hex, not both');
  let stateCbor: Uint8Array;
  if (p.flags.has('state-cbor-hex')) {
    stateCbor = hexArg(p.flags.get('state-cbor-hex')!, 'state-cbor-hex');
    checkPreferredCbor(stateCbor);
  } else if (p.flags.has('state-json')) {
    const r = stateJsonToCbor(p.flags.get('state-json')!);
    // Deeper than 16 levels: the core refuses it (state_encoding) after its argument checks.
    stateCbor = 'cbor' in r ? r.cbor : new Uint8Array([...new Uint8Array(17).fill(0x81), 0x00]);
  } else stateCbor = new Uint8Array([0xf6]);
  const ttl = p.flags.has('ttl') ? uint(p.flags.get('ttl')!, 'ttl') : 600n;
  const { codec, ctx, tool } = setup(p);
  try {
    const options = { tool, step: p.flags.get('step')!, stateCbor, ttl, context: ctx };
    const m = p.switches.has('single-use') ? codec.mintSingleUseExact(options) : codec.mintExact(options);
    print(`{"token":${JSON.stringify(m.token)},"key_id":${m.keyId},"issued_at":${m.issuedAt},"expires_at":${m.expiresAt}}`);
    return 0;
  } catch (e) {
    if (!(e instanceof ReqstateError)) throw e;
    print(JSON.stringify({ reason: e.reason, message: e.message }));
    return 1;
  }
}

function readStdinToken(): string {
  let buf: Buffer;
  try {
    buf = readFileSync(0);
  } catch (e) {
    usage(`cannot read standard input: ${(e as Error).message}`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    usage('standard input is not UTF-8');
  }
  return text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
}

const REPLAY_FLAGS = ['replay-store', 'replay-key-prefix', 'replay-timeout-ms', 'replay-max-skew-ms'];

interface ReplayOptions {
  url: string;
  prefix: string;
  timeoutMs: number;
  maxSkewMs: number;
}

/** The --replay-* flags (only with --consume; the others only with --replay-store). */
function replayOptions(p: Parsed): ReplayOptions | undefined {
  const given = REPLAY_FLAGS.filter((f) => p.flags.has(f));
  if (given.length === 0) return undefined;
  if (!p.switches.has('consume')) usage(`--${given[0]} needs --consume`);
  const url = p.flags.get('replay-store');
  if (url === undefined) usage(`--${given[0]} needs --replay-store`);
  const shown = redactRedisUrl(url);
  if (/,\s*[a-z][a-z0-9+.-]*:\/\//i.test(url)) usage(`--replay-store takes one Redis URL, not a list: ${shown}`);
  if (/^unix:\/\//i.test(url)) {
    // unix://[user[:password]@]/path/to/redis.sock[?db=N], as node-redis reads it.
    if (!/^unix:\/\/(?:[^:@/]*(?::[^@/]*)?@)?\/[^?#]+(?:\?db=[0-9]+)?$/i.test(url)) usage(`--replay-store: a unix:// URL names a socket's absolute path (percent-encode a password's reserved characters): ${shown}`);
  } else {
    if (!/^rediss?:\/\//i.test(url)) usage(`--replay-store must be a redis://, rediss:// or unix:// URL: ${shown}`);
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      usage(`--replay-store is not a valid URL (percent-encode a password's reserved characters): ${shown}`);
    }
    if (parsed.hostname === '') usage(`--replay-store has no host: ${shown}`);
    if (parsed.pathname.length > 1 && !/^\/[0-9]+$/.test(parsed.pathname)) usage(`--replay-store: the path must be a database number: ${shown}`);
  }
  return {
    url,
    prefix: p.flags.get('replay-key-prefix') ?? 'reqstate:',
    timeoutMs: ranged(p, 'replay-timeout-ms', 1, 60000) ?? 1000,
    maxSkewMs: ranged(p, 'replay-max-skew-ms', 1, 60000) ?? 2000,
  };
}

/** The spent-token record in Redis: connect (once steps 0 to 14 passed), record, close. */
async function consumeInRedis<T>(redemption: Redemption<T>, replay: ReplayOptions): Promise<Verified<T>> {
  let store: RedisReplayStore;
  try {
    // One attempt to connect, within the deadline: a one-shot command does not wait for Redis to come back.
    store = await createRedisReplayStore({ ...replay, clientOptions: { socket: { reconnectStrategy: false } } });
  } catch (e) {
    if ((e as { code?: unknown })?.code === 'ERR_MODULE_NOT_FOUND') usage('--replay-store needs the redis package (npm install redis)');
    throw storeRefusal(e);
  }
  try {
    return await redemption.redeem(store);
  } catch (e) {
    const cause = (e as { cause?: unknown }).cause;
    if (e instanceof ReqstateError && cause instanceof ReplayStoreError && cause.maybeRecorded) {
      // The store's advice (retry through the same store object) cannot be followed across runs.
      throw new ReqstateError('replay_store_unavailable', `the token is refused and may have been recorded (${cause.message.split('; the token may')[0]}): if it was, a later consume is refused as replayed`);
    }
    throw e;
  } finally {
    await store.close();
  }
}

async function verify(p: Parsed): Promise<number> {
  const tokens = [...p.positional, ...(p.flags.has('token') ? [p.flags.get('token')!] : [])];
  if (tokens.length !== 1) usage(tokens.length === 0 ? 'a TOKEN (or --token TOKEN) is required' : 'give exactly one token');
  const replay = replayOptions(p);
  const { codec, ctx, tool } = setup(p);
  const token = tokens[0] === '-' ? readStdinToken() : tokens[0];
  try {
    const options = { tool, context: ctx, expectedStep: p.flags.get('expected-step'), decode: false } as const;
    let v: Verified;
    if (!p.switches.has('consume')) v = codec.verify(token, options);
    // --replay-store: the record kept in Redis (the shared rule), reached only by a token that passed every other check.
    else if (replay !== undefined) v = await consumeInRedis(codec.verifySingleUse(token, options), replay);
    // --consume alone: a spent-token record for this run only (docs/CLI.md).
    else v = codec.consumeSync(token, options, new MemoryReplayStore({ capacity: 64 }));
    const json = stateToJson(v.stateCbor);
    print(
      `{"valid":true,"step":${JSON.stringify(v.step)},${json === undefined ? '' : `"state":${json},`}"state_cbor_hex":"${toHex(v.stateCbor)}","key_id":${v.keyId},"issued_at":${v.issuedAtBig},"expires_at":${v.expiresAtBig}}`,
    );
    return 0;
  } catch (e) {
    if (!(e instanceof ReqstateError)) throw e;
    print(JSON.stringify({ valid: false, reason: e.reason, message: e.message }));
    return 1;
  }
}

/** `keys new`: a fresh key in the compact form, from the platform's CSPRNG; never written anywhere but stdout. */
function keysNew(p: Parsed): number {
  if (p.positional.length > 0) usage('keys new takes no positional argument');
  const idText = p.flags.get('id') ?? '1';
  const id = uint(idText, 'id');
  if (id > 4294967295n || !/^(0|[1-9][0-9]*)$/.test(idText)) usage('--id must be a key id in 0..=4294967295, without leading zeros');
  const status = p.flags.get('status') ?? 'primary';
  if (status !== 'primary' && status !== 'active') usage('--status must be primary (a keyring of this one key) or active (a key to add to a keyring)');
  const algorithm = p.flags.get('algorithm') ?? 'xchacha20-poly1305';
  if (algorithm !== 'xchacha20-poly1305' && algorithm !== 'hmac-sha256') usage('--algorithm must be xchacha20-poly1305 or hmac-sha256');
  const bytes = ranged(p, 'secret-bytes', 32, 1024) ?? 32;
  const secret = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(secret);
  const entry = `${id}:${status}:${algorithm}:${base64Encode(secret)}`;
  secret.fill(0);
  // What is printed loads (checked as the keyring of this one key, primary).
  Keyring.fromCompact(entry.replace(':active:', ':primary:'));
  print(entry);
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  try {
    const [command, ...rest] = argv;
    if (command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(HELP);
      return 0;
    }
    if (command === 'keys') {
      const [sub, ...more] = rest;
      if (sub !== 'new') usage(sub === undefined ? 'keys needs a subcommand: keys new' : 'unknown keys subcommand; expected keys new (the TOML keyring file is managed by the Rust binary: reqstate keys)');
      const p = parseArgs('keys new', more);
      if (p.switches.has('help')) {
        process.stdout.write(HELP);
        return 0;
      }
      return keysNew(p);
    }
    if (command !== 'mint' && command !== 'verify') usage(command === undefined ? 'a command is required: mint, verify or keys new' : 'unknown command; expected mint, verify or keys new');
    const p = parseArgs(command, rest);
    if (p.switches.has('help')) {
      process.stdout.write(HELP);
      return 0;
    }
    return command === 'mint' ? mint(p) : await verify(p);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`reqstate-ts: ${e.message}\n`);
      return 64;
    }
    if (e instanceof ReqstateError && e.reason === 'invalid_argument') {
      // Policy bounds and other argument errors before the core ran.
      process.stderr.write(`reqstate-ts: ${e.message}\n`);
      return 64;
    }
    process.stderr.write(`reqstate-ts: internal error: ${e instanceof Error ? e.message : String(e)}\n`);
    return 64;
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
