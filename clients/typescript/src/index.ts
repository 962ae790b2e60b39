// @reqstate/codec: reqstate requestState tokens (docs/FORMAT.md v1),
// minted and verified in-process. No Node-only import: the same build runs on
// Cloudflare workerd, Node >= 20, Deno and Bun, with node:crypto's primitives
// where the runtime offers them synchronously (src/primitives.ts).
// Keyrings in TOML (docs/KEYRING.md) or the compact form.
import './toml.js';
export * from './api.js';
