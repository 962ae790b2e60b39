// The TOML keyring of docs/KEYRING.md, read with smol-toml. The package's
// main entry loads this module, which installs the reader into keyring.ts;
// the compact entry (@reqstate/codec/compact, for Workers whose keyring is a
// secret binding in the compact form) does not, so its bundle has no TOML
// parser. package.json lists this file under "sideEffects".
import { parse as parseToml, TomlError } from 'smol-toml';
import { ALGORITHMS, ENTRY_FIELDS, MAX_INSTANT, STATUSES, bad, decodeSecret, setTomlReader, showName, type Algorithm, type KeySpec, type KeyStatus, type KeyringSources } from './keyring.js';

function readToml(text: string, sources: KeyringSources): { specs: KeySpec[]; headers: readonly (number | undefined)[] | undefined } {
    let doc: Record<string, unknown>;
    try {
      doc = withDateTimeText(() => parseToml(text, { integersAsBigInt: true, useLegacyDate: false }) as Record<string, unknown>);
    } catch (e) {
      const line = e instanceof TomlError ? `line ${e.line}: ` : '';
      // The parser's message quotes the offending text; only its first line (the description) is kept.
      bad(`${line}not valid TOML: ${String((e as Error).message).split('\n')[0].replace(/^Invalid TOML document: /, '')}`);
    }
    for (const k of Object.keys(doc)) {
      if (k !== 'version' && k !== 'key') bad(`unknown top-level field ${showName(k)}`);
    }
    if (doc.version !== undefined && doc.version !== 1n) {
      bad(typeof doc.version === 'bigint' ? `unsupported keyring version ${doc.version}; this reader knows version 1` : '`version` must be the integer 1');
    }
    const tables = doc.key;
    if (tables === undefined) bad('no key at all; at least one [[key]] is required');
    if (!Array.isArray(tables)) bad('`key` must be an array of tables ([[key]])');
    const source = headerLines(text, tables.length);
    const specs: KeySpec[] = tables.map((t: unknown, i: number) => {
      const line = source?.headers[i];
      const prefix = line !== undefined ? `line ${line}: ` : '';
      let where = `${prefix}key #${i + 1}`;
      if (t === null || typeof t !== 'object' || Array.isArray(t)) bad(`${where}: must be a table`);
      const table = t as Record<string, unknown>;
      for (const f of Object.keys(table)) {
        if (!ENTRY_FIELDS.includes(f)) bad(`${where}: unknown field ${showName(f)}, expected one of ${ENTRY_FIELDS.map((n) => `\`${n}\``).join(', ')}`);
      }
      const id = table.id;
      if (typeof id !== 'bigint' || id < 0n || id > 0xffffffffn) {
        bad(typeof id === 'bigint' ? `${where}: \`id\` ${id} is not in 0..=4294967295` : `${where}: \`id\` must be an integer in 0..=4294967295 (the value is not shown)`);
      }
      where = `${prefix}key ${id}`;
      if (table.status === undefined) bad(`${where}: \`status\` is required`);
      if (typeof table.status !== 'string' || !STATUSES.includes(table.status)) bad(`${where}: unknown status (the value is not shown); expected "primary", "active" or "retired"`);
      if (table.algorithm !== undefined && (typeof table.algorithm !== 'string' || !ALGORITHMS.includes(table.algorithm))) {
        bad(`${where}: unknown algorithm (the value is not shown); expected "xchacha20-poly1305" or "hmac-sha256"`);
      }
      let created: string | undefined;
      if (table.created !== undefined) {
        const c = table.created;
        const at = c instanceof DateTimeText && c.kind === 'offset' ? readDateTime(c.text) : undefined;
        if (at === undefined) bad(`${where}: \`created\` must be an offset date-time such as 2026-11-30T12:00:00Z (the value is not shown)`);
        // Refused before 1970 as the Rust reader refuses it, so that one file loads or fails alike in both.
        if (unixSeconds(at) < 0) bad(`${where}: created is before 1970-01-01T00:00:00Z`);
        created = new Date(unixSeconds(at) * 1000).toISOString();
      }
      // mint_from and retire_at (docs/KEYRING.md, "How an instant is read"), decided on the value the parser delimited.
      const instant = (field: 'mint_from' | 'retire_at'): number | undefined => {
        const v = table[field];
        if (v === undefined) return undefined;
        if (!(v instanceof DateTimeText)) {
          bad(`${where}: \`${field}\` must be a TOML date-time such as 2026-11-30T12:00:00Z (unquoted), not ${tomlKind(v)} (the value is not shown)`);
        }
        const problem = scheduleInstant(v);
        if (typeof problem === 'string') bad(`${where}: ${problem.replace('FIELD', field)}`);
        return problem;
      };
      const mintFrom = instant('mint_from');
      const retireAt = instant('retire_at');
      const given = ['secret', 'secret_file', 'secret_env'].filter((f) => table[f] !== undefined);
      if (given.length !== 1) bad(`${where}: exactly one of secret, secret_file or secret_env must be given`);
      const field = given[0];
      const value = table[field];
      if (typeof value !== 'string') bad(`${where}: \`${field}\` must be a string (the value is not shown)`);
      let secretText: string;
      if (field === 'secret') secretText = value;
      else if (field === 'secret_env') {
        if (!sources.env) bad(`${where}: secret_env is not available here (no environment was given to the keyring loader); use secret, or pass { env }`);
        const v = sources.env[value];
        if (typeof v !== 'string') bad(`${where}: the environment variable named by secret_env is not set (the name is not shown: it could be key material)`);
        secretText = v;
      } else {
        if (!sources.readFile) bad(`${where}: secret_file is not available here (no file reader was given to the keyring loader); use secret, or pass { readFile }`);
        const path = value.startsWith('/') || !sources.baseDir ? value : `${sources.baseDir.replace(/\/+$/, '')}/${value}`;
        try {
          secretText = sources.readFile(path);
        } catch (e) {
          bad(`${where}: cannot read secret_file: ${(e as Error).message.replace(path, '<path not shown>')}`);
        }
        secretText = secretText.trim();
      }
      return {
        id: Number(id),
        status: table.status as KeyStatus,
        algorithm: (table.algorithm as Algorithm | undefined) ?? 'xchacha20-poly1305',
        secret: decodeSecret(secretText, where),
        created,
        mintFrom,
        retireAt,
      };
    });
    return { specs, headers: source?.headers };
}

/** What a TOML value is, for messages that never show it. */
function tomlKind(v: unknown): string {
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'bigint' || typeof v === 'number') return 'a number';
  if (typeof v === 'boolean') return 'a boolean';
  if (Array.isArray(v)) return 'an array';
  return 'a table';
}

/**
 * The 1-based line of each `[[key]]` header of a TOML keyring (the parser
 * does not say), for messages; `undefined` when the headers found are not
 * one per table (inline tables: messages then go without lines).
 */
function headerLines(text: string, tables: number): { headers: number[] } | undefined {
  const headers: number[] = [];
  text.split(/\r?\n/).forEach((l, i) => {
    if (/^[ \t]*\[\[[ \t]*key[ \t]*\]\][ \t]*(#.*)?$/.test(l)) headers.push(i + 1);
  });
  return headers.length === tables ? { headers } : undefined;
}

/** A TOML date-time value as written (the parser delimits it; this module decides what it means). */
class DateTimeText {
  constructor(
    readonly text: string,
    readonly kind: 'offset' | 'local' | 'date' | 'time',
  ) {}
}

/**
 * Runs `parse` with smol-toml handing over each date-time's text. Its
 * legacy dates are JavaScript `Date`s, which roll impossible dates over
 * (Feb 30 becomes 2 March) and keep only milliseconds, so the value could
 * not be checked; asked for Temporal values instead, it passes each
 * date-time's text to `Temporal.*.from`, which is stood in for here for the
 * length of the (synchronous) parse and restored after, whether or not the
 * runtime has Temporal.
 */
function withDateTimeText<T>(parse: () => T): T {
  const g = globalThis as { Temporal?: unknown };
  const saved = Object.getOwnPropertyDescriptor(g, 'Temporal');
  // smol-toml appends a `[zone]` to an offset date-time's text for Temporal.
  const as = (kind: DateTimeText['kind']) => ({ from: (text: string) => new DateTimeText(text.replace(/\[[^\]]*\]$/, ''), kind) });
  Object.defineProperty(g, 'Temporal', {
    value: { ZonedDateTime: as('offset'), PlainDateTime: as('local'), PlainDate: as('date'), PlainTime: as('time') },
    configurable: true,
    writable: true,
  });
  try {
    return parse();
  } finally {
    if (saved) Object.defineProperty(g, 'Temporal', saved);
    else delete g.Temporal;
  }
}

/** The fields of an offset date-time as TOML reads one: a real calendar date, hour 0-23, minute 0-59, second 0-60, offset -23:59..+23:59. */
interface DateTimeFields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  /** Whether seconds were written, and a fraction after them. */
  hasSeconds: boolean;
  hasFraction: boolean;
  /** Minutes east of UTC. */
  offsetMinutes: number;
}

function readDateTime(text: string): DateTimeFields | undefined {
  const m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(\.[0-9]+)?)?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))$/.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute] = m.slice(1, 6).map(Number);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (month < 1 || month > 12 || day < 1 || day > days[month - 1] || hour > 23 || minute > 59 || second > 60) return undefined;
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const [oh, om] = [Number(m[10]), Number(m[11])];
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  return { year, month, day, hour, minute, second, hasSeconds: m[6] !== undefined, hasFraction: m[7] !== undefined, offsetMinutes };
}

/** Unix seconds of date-time fields, the offset applied (arithmetic, not `Date.UTC`, which reads years 0-99 as 1900-1999). */
function unixSeconds(at: DateTimeFields): number {
  // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
  const y = at.month <= 2 ? at.year - 1 : at.year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (at.month + (at.month > 2 ? -3 : 9)) + 2) / 5) + at.day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  const days = era * 146097 + doe - 719468;
  return days * 86400 + at.hour * 3600 + at.minute * 60 + at.second - at.offsetMinutes * 60;
}

/**
 * A schedule instant (docs/KEYRING.md, "How an instant is read") as unix
 * seconds, or what is wrong with it (`FIELD` standing for its name).
 */
function scheduleInstant(v: DateTimeText): number | string {
  if (v.kind !== 'offset') return 'FIELD must be a full date-time with an offset, e.g. 2026-11-30T12:00:00Z';
  const at = readDateTime(v.text);
  if (at === undefined) return '`FIELD` is not a valid TOML offset date-time (a real calendar date, hour 00-23, minute 00-59, offset -23:59..+23:59); the value is not shown';
  if (at.hasFraction) return '`FIELD` must be a whole second, written without a fraction (a schedule counts in seconds, as tokens do)';
  if (!at.hasSeconds) return '`FIELD` must write its seconds (RFC 3339), e.g. 2026-11-30T12:00:00Z';
  if (at.second === 60) return '`FIELD` names second 60 (a leap second), which unix time does not count; write the second before or the minute after';
  const seconds = unixSeconds(at);
  if (seconds < 0) return 'FIELD is before 1970-01-01T00:00:00Z';
  if (seconds > MAX_INSTANT) return 'FIELD is after 9999-12-31T23:59:59Z once its offset is applied';
  return seconds;
}

setTomlReader(readToml);
