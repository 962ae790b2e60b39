// Holds the Rust core's reading of random scheduled keyrings (JSON lines
// from keyring-eval on stdin) against @reqstate/codec's
// (clients/typescript/dist): the same refusal or load, the same minting key,
// the same verifying set and the same schedule check. Prints a summary, the
// counts of each kind of disagreement and up to MAX_EXAMPLES examples of
// each; exits 1 on any disagreement or any violated invariant.
//
//   keyring-eval random 100000 1 | node fuzz/differential/compare.mjs
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const { Keyring } = await import(path.join(here, '../../clients/typescript/dist/index.js'));
const MAX_EXAMPLES = Number(process.env.MAX_EXAMPLES ?? 3);
// The Rust side checks the schedule against Policy::new(): 24 h, 60 s.
const POLICY = { maxLifetime: 86400, clockLeeway: 60 };

function typescript(text, now) {
  let keyring;
  try {
    keyring = Keyring.fromToml(text);
  } catch (e) {
    return { ok: false, error: String(e.message ?? e) };
  }
  const verifying = keyring.keys.filter((k) => !k.isRetiredAt(now)).map((k) => k.id).sort((a, b) => a - b);
  let scheduleOk = true;
  try {
    keyring.checkSchedule(POLICY);
  } catch {
    scheduleOk = false;
  }
  return { ok: true, minting: keyring.mintingKey(now).id, verifying, schedule_ok: scheduleOk };
}

/** An error message without its numbers: the cause, not the instance. */
const cause = (message) => message.replace(/[0-9]+/g, '#').replace(/"[^"]*"/g, '"…"');

/** The kind of disagreement, or undefined when the two agree. */
function disagreement(rust, ts) {
  if (rust.panic !== undefined) return `rust invariant violated: ${rust.panic}`;
  if (rust.ok !== ts.ok) {
    return rust.ok ? `rust loads, typescript refuses: ${cause(ts.error)}` : `typescript loads, rust refuses: ${cause(rust.error)}`;
  }
  if (!rust.ok) return undefined;
  if (rust.minting !== ts.minting) return 'different minting key';
  if (JSON.stringify(rust.verifying) !== JSON.stringify(ts.verifying)) return 'different verifying set';
  if (rust.schedule_ok !== ts.schedule_ok) return 'different schedule check';
  return undefined;
}

const kinds = new Map();
let total = 0;
let loaded = 0;
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  const { input, text, now, rust } = JSON.parse(line);
  total++;
  const ts = typescript(text, now);
  if (rust.ok) loaded++;
  const kind = disagreement(rust, ts);
  if (kind === undefined) continue;
  const seen = kinds.get(kind) ?? { count: 0, examples: [] };
  seen.count++;
  if (seen.examples.length < MAX_EXAMPLES) seen.examples.push({ input, now, text, rust, typescript: ts });
  kinds.set(kind, seen);
}
const disagreements = [...kinds.values()].reduce((n, k) => n + k.count, 0);
console.log(`keyring differential: ${total} keyrings (${loaded} loaded by the core), ${disagreements} disagreements`);
for (const [kind, { count, examples }] of kinds) {
  console.log(`\n== ${kind}: ${count}`);
  for (const e of examples) console.log(JSON.stringify(e, null, 1));
}
process.exit(disagreements === 0 && total > 0 ? 0 : 1);
