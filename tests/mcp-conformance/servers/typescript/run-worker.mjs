// Runs dist/worker.js in workerd through miniflare on 127.0.0.1:$PORT with the contract's
// environment as bindings; prints `listening <url>` when ready. The Worker's console.error lines
// (the refusal log) reach this process's stderr.
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { Miniflare, Log, LogLevel } from 'miniflare';

const dir = fileURLToPath(new URL('.', import.meta.url));
const bindings = { REQSTATE_KEYS: process.env.REQSTATE_KEYS ?? '' };
for (const name of ['REQSTATE_TTL_SECONDS', 'REQSTATE_CLOCK_LEEWAY_SECONDS']) if (process.env[name]) bindings[name] = process.env[name];
const mf = new Miniflare({
  modules: true,
  script: readFileSync(`${dir}dist/worker.js`, 'utf8'),
  scriptPath: `${dir}dist/worker.js`,
  compatibilityDate: '2026-07-01',
  bindings,
  host: '127.0.0.1',
  port: Number(process.env.PORT ?? '0'),
  log: new Log(LogLevel.WARN),
  cf: false,
});
const url = await mf.ready;
process.stdout.write(`listening ${new URL('/mcp', url)}\n`);
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => mf.dispose().then(() => process.exit(0)));
