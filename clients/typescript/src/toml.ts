// The TOML keyring of docs/KEYRING.md, read with smol-toml. The package's
// main entry loads this module, which installs the reader into keyring.ts;
// the compact entry (@reqstate/codec/compact, for Workers whose keyring is a
// secret binding in the compact form) does not, so its bundle has no TOML
// parser. package.json lists this file under "sideEffects".
import { parse as parseToml, TomlDate, TomlError } from 'smol-toml';
import { ALGORITHMS, ENTRY_FIELDS, STATUSES, bad, decodeSecret, setTomlReader, showName, type Algorithm, type KeySpec, type KeyStatus, type KeyringSources } from './keyring.js';

function readToml(text: string, sources: KeyringSources): { specs: KeySpec[]; headers: readonly (number | undefined)[] | undefined } {
    let doc: Record<string, unknown>;
    try {
      doc = parseToml(text, { integersAsBigInt: true }) as Record<string, unknown>;
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
    const source = sourceLines(text, tables.length);
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
        if (!(c instanceof TomlDate) || !c.isDateTime() || c.isLocal()) bad(`${where}: \`created\` must be an offset date-time such as 2026-11-30T12:00:00Z (the value is not shown)`);
        created = c.toISOString();
      }
      // mint_from and retire_at: offset date-times in whole seconds, from 1970 (docs/KEYRING.md, "Keys on a schedule").
      const instant = (field: 'mint_from' | 'retire_at'): number | undefined => {
        const v = table[field];
        if (v === undefined) return undefined;
        if (!(v instanceof TomlDate)) {
          bad(`${where}: \`${field}\` must be a TOML date-time such as 2026-11-30T12:00:00Z (unquoted), not ${tomlKind(v)} (the value is not shown)`);
        }
        if (!v.isDateTime() || v.isLocal()) bad(`${where}: ${field} must be a full date-time with an offset, e.g. 2026-11-30T12:00:00Z`);
        const ms = v.getTime();
        if (ms < 0) bad(`${where}: ${field} is before 1970-01-01T00:00:00Z`);
        // The parser keeps milliseconds; the digits after them are read from the line itself.
        const fraction = source?.fraction(i, field);
        if (ms % 1000 !== 0 || (fraction !== undefined && /[1-9]/.test(fraction.slice(0, 9)))) {
          bad(`${where}: \`${field}\` must be a whole second (a schedule counts in seconds, as tokens do)`);
        }
        return ms / 1000;
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
 * Where the `[[key]]` tables of a TOML keyring are (the parser does not
 * say): the 1-based line of each header, and the fraction of a second
 * written in a table's `mint_from` or `retire_at` line. `undefined` when
 * the headers found are not one per table (a file written another way:
 * messages then go without lines).
 */
function sourceLines(text: string, tables: number): { headers: number[]; fraction(table: number, field: string): string | undefined } | undefined {
  const lines = text.split(/\r?\n/);
  const headers: number[] = [];
  lines.forEach((l, i) => {
    if (/^[ \t]*\[\[[ \t]*key[ \t]*\]\][ \t]*(#.*)?$/.test(l)) headers.push(i + 1);
  });
  if (headers.length !== tables) return undefined;
  return {
    headers,
    fraction(table, field) {
      const end = table + 1 < headers.length ? headers[table + 1] - 1 : lines.length;
      for (let i = headers[table]; i < end; i++) {
        const m = new RegExp(`^[ \\t]*${field}[ \\t]*=[ \\t]*[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.([0-9]+))?`).exec(lines[i]);
        if (m) return m[1] ?? '';
      }
      return undefined;
    },
  };
}

setTomlReader(readToml);
