#!/usr/bin/env bash
# Starts the Python conformance server (server.py: the official `mcp` 2.3.0 SDK's
# MCPServer with reqstate's compact requestState boundary) per the conformance
# servers' contract (issue 26):
#
#   REQSTATE_KEYS="$(cat keyring.toml)" PORT=0 bash tests/mcp-conformance/servers/python/start.sh
#
# Env: REQSTATE_KEYS (keyring TOML text, inline secrets), PORT (0: a free port),
# REQSTATE_TTL_SECONDS (default 600), REQSTATE_CLOCK_LEEWAY_SECONDS (default 60).
# Installs the package first (crates/reqstate-python/run-tests.sh --install-only:
# the project-local .venv with the pinned SDK, and the wheel built from this
# checkout, reused when the sources did not change); everything it prints goes to
# stderr, so stdout carries only `listening http://127.0.0.1:<port>/mcp` once the
# server accepts requests. Refusals: one stderr line each,
# `reqstate refused <method> <tool>: <reason>: <message>`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
package="$repo/crates/reqstate-python"

: "${REQSTATE_KEYS:?start.sh: REQSTATE_KEYS (the keyring text) is required}"
if [[ "${REQSTATE_SKIP_INSTALL:-}" != 1 ]]; then
    bash "$package/run-tests.sh" --install-only 1>&2
fi
exec "$package/.venv/bin/python" -u "$here/server.py"
