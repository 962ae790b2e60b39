// npm's `prepare` for @reqstate/codec: compiles src/ into dist/ with tsc (the
// library, then the Node command line, dist/cli.js). npm runs it for `npm
// pack`/`npm publish`, for a git dependency (after installing the
// devDependencies), and for a `file:` dependency, which npm links as the
// source folder without installing anything in it: when TypeScript is missing
// there, this installs the package's own pinned build dependencies first
// (`npm ci --ignore-scripts` from package-lock.json). Everything it prints goes
// to stderr, so that `npm pack --json` stays JSON.
import { chmodSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, 'node_modules/typescript/bin/tsc');
if (!existsSync(tsc)) {
  console.error('@reqstate/codec prepare: installing the build dependencies (npm ci --ignore-scripts in ' + here + ')');
  const npm = process.env.npm_execpath;
  const [cmd, pre] = npm && npm.endsWith('.js') ? [process.execPath, [npm]] : ['npm', []];
  execFileSync(cmd, [...pre, 'ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio: ['ignore', 2, 2] });
}
for (const config of ['tsconfig.json', 'tsconfig.cli.json']) {
  execFileSync(process.execPath, [tsc, '-p', config], { cwd: here, stdio: ['ignore', 2, 2] });
}
chmodSync(join(here, 'dist/cli.js'), 0o755);
