// Bundles the Node entry (dist/node.mjs) and the Worker entry (dist/worker.js) with esbuild.
import * as esbuild from 'esbuild';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
await esbuild.build({
  entryPoints: [`${dir}src/node.ts`],
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outfile: `${dir}dist/node.mjs`,
  logLevel: 'warning',
});
await esbuild.build({
  entryPoints: [`${dir}src/worker.ts`],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  conditions: ['workerd', 'worker', 'browser'],
  mainFields: ['module', 'main'],
  outfile: `${dir}dist/worker.js`,
  logLevel: 'warning',
});
console.log('built dist/node.mjs and dist/worker.js');
