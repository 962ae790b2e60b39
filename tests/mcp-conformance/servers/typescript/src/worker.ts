// The Worker entry (bundled by esbuild, run in workerd by ../run-worker.mjs): the same app as the Node entry.
import { createApp, settingsFromEnv } from './wiring.js';

export interface Env {
  REQSTATE_KEYS: string;
  REQSTATE_TTL_SECONDS?: string;
  REQSTATE_CLOCK_LEEWAY_SECONDS?: string;
}

// One app per isolate, rebuilt when a binding changes (a rotated secret takes effect without a redeploy).
let cached: { key: string; app: (request: Request) => Promise<Response> } | undefined;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const key = JSON.stringify([env.REQSTATE_KEYS, env.REQSTATE_TTL_SECONDS, env.REQSTATE_CLOCK_LEEWAY_SECONDS]);
    if (cached?.key !== key) cached = { key, app: createApp(settingsFromEnv({ ...env }, (line) => console.error(line))) };
    return cached.app(request);
  },
};
