#!/usr/bin/env bash
# Checks every file under deploy/ (docs/DEPLOY.md, "Checking the kit"):
#
#   bash deploy/run-tests.sh [pytest args...]
#
# - deploy/kubernetes/*.yaml: the Kubernetes schemas, offline
#   (kubernetes-validate, 1.29 / 1.33 / 1.37, --strict); the security
#   properties (PyYAML), each also removed once to prove the check fails; the
#   reqstate container's command line started for real with the manifest's
#   file layout: probes, mint and verify, rotation through a Secret's `..data`
#   swap, SIGTERM.
# - deploy/systemd/: `systemd-analyze verify`, `systemd-analyze security
#   --offline=true` (exposure at most 2.0, printed), sysusers.d and
#   tmpfiles.d applied to a scratch root, and the unit's ExecStart started
#   for real (under strace, to hold SystemCallFilter=, RestrictAddressFamilies=
#   and MemoryDenyWriteExecute= against what it really does) and probed with
#   `reqstate health`.
# - deploy/prometheus/: `promtool check rules` and `promtool test rules` on
#   the alert rules, and every metric and label they use checked against a
#   real sidecar's /metrics (so the rules cannot drift from the code).
#
# Installs what it needs: the pinned deploy/requirements.txt into deploy/.venv
# (git-ignored), and the Debian packages systemd (systemd-analyze,
# systemd-sysusers, systemd-tmpfiles), util-linux (unshare, setpriv),
# strace and prometheus (promtool) when missing. Runs as root (the tests
# switch users, bind-mount and make network namespaces). Never builds Rust:
# the binary is $REQSTATE_BIN,
# else <repo>/target/debug/reqstate. Idempotent; exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
venv="$here/.venv"
started=$SECONDS

export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "deploy/run-tests.sh: no reqstate binary at $REQSTATE_BIN" >&2
    echo "  build it first (cargo build --bin reqstate) or set REQSTATE_BIN" >&2
    exit 1
fi
if [[ "$(id -u)" -ne 0 ]]; then
    echo "deploy/run-tests.sh: run as root (the tests run the sidecar as the manifests' users," >&2
    echo "  bind-mount volumes and make network namespaces)" >&2
    exit 1
fi

missing=()
for tool in systemd-analyze systemd-sysusers systemd-tmpfiles; do
    command -v "$tool" >/dev/null 2>&1 || { missing+=(systemd); break; }
done
for tool in unshare setpriv mount; do
    command -v "$tool" >/dev/null 2>&1 || { missing+=(util-linux mount); break; }
done
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [[ "${#missing[@]}" -gt 0 ]]; then
    echo "deploy/run-tests.sh: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# shellcheck source=../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
ensure_venv "$venv" "$here/requirements.txt"

echo "deploy/run-tests.sh: $($venv/bin/python -m kubernetes_validate --version 2>&1 | head -1), $(systemd-analyze --version | head -1), $(promtool --version 2>&1 | head -1), binary $REQSTATE_BIN" >&2
cd "$here"
status=0
"$venv/bin/python" -m pytest "$@" || status=$?
echo "deploy/run-tests.sh: finished in $((SECONDS - started)) s (exit $status)" >&2
exit "$status"
