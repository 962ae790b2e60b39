"""deploy/prometheus/: the alert rules are valid (`promtool check rules`),
fire and stay quiet where their unit tests say (`promtool test rules`), and
use only metrics, label matchers and labels that a real sidecar exports, so
the rules cannot drift from the code."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from support import DEPLOY, Process, free_port, http_get, private_tempdir, reqstate_bin, run, wait_until

PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "reqstate-alerts.yaml"
RULE_TESTS = PROMETHEUS / "reqstate-alerts.test.yaml"

# Labels Prometheus adds to every scraped series (the target's), not the sidecar.
TARGET_LABELS = {"job", "instance"}

SELECTOR = re.compile(r"\b(reqstate_[a-z0-9_]+)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|on|without|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: deploy/run-tests.sh installs the Debian package prometheus"
    return path


def test_the_rules_are_valid() -> None:
    out = run([promtool(), "check", "rules", str(RULES)])
    assert "SUCCESS" in out.stdout, out.stdout


def test_each_alert_fires_and_stays_quiet_as_its_unit_tests_say() -> None:
    out = run([promtool(), "test", "rules", RULE_TESTS.name], cwd=PROMETHEUS)
    assert "SUCCESS" in out.stdout, out.stdout
    # Every alert has a test that expects it to fire and one that expects silence.
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for test in tests:
        for case in test.get("alert_rule_test", []):
            (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {rule["alert"] for rule in rules()}
    assert alerts == fired, f"alerts never fired in a test: {alerts - fired}"
    assert alerts == quiet, f"alerts never tested quiet: {alerts - quiet}"


def rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def parse_scrape(text: str) -> dict[str, list[dict[str, str]]]:
    """Metric name -> the label sets of its series (from the sample lines),
    and every family named by a TYPE line (possibly with no series)."""
    series: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            series.setdefault(line.split()[2], [])
            continue
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        labels = dict((k, v) for k, _, v in MATCHER.findall(rest.partition("}")[0])) if rest else {}
        series.setdefault(name.split()[0], []).append(labels)
    return series


def matches(labels: dict[str, str], matchers: list[tuple[str, str, str]]) -> bool:
    for name, op, value in matchers:
        have = labels.get(name, "")
        ok = {
            "=": have == value,
            "!=": have != value,
            "=~": re.fullmatch(value, have) is not None,
            "!~": re.fullmatch(value, have) is None,
        }[op]
        if not ok:
            return False
    return True


@pytest.fixture(scope="module")
def scrape() -> dict[str, list[dict[str, str]]]:
    """The /metrics of a real sidecar on a fresh keyring, as parsed."""
    binary = str(reqstate_bin())
    tmp = private_tempdir("reqstate-prom-")
    keyring = tmp / "keyring.toml"
    env = {**os.environ, "REQSTATE_LOG": "warn"}
    run([binary, "keys", "new", "--keyring", str(keyring)], env=env)
    token = tmp / "auth-token"
    token.write_text("a-bearer-token\n")
    token.chmod(0o600)
    port = free_port()
    proc = Process(
        [
            binary,
            "serve",
            "--keyring",
            str(keyring),
            "--auth-token-file",
            str(token),
            "--listen",
            f"unix:{tmp / 'reqstate.sock'}",
            "--metrics",
            f"127.0.0.1:{port}",
        ],
        env,
        tmp / "sidecar.log",
    )
    try:
        wait_until("the metrics listener", lambda: _ready(port))
        status, text = http_get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200, text
        proc.assert_running()
        return parse_scrape(text)
    finally:
        proc.kill()


def _ready(port: int) -> bool:
    try:
        return http_get(f"http://127.0.0.1:{port}/ready")[0] == 200
    except OSError:
        return False


def test_every_metric_and_label_the_rules_use_is_exported(scrape: dict[str, list[dict[str, str]]]) -> None:
    checked = 0
    for rule in rules():
        expr = rule["expr"]
        names = set()
        for name, selector in SELECTOR.findall(expr):
            assert name in scrape, f"{rule['alert']}: the sidecar exports no {name}"
            names.add(name)
            matchers = MATCHER.findall(selector) if selector else []
            assert any(matches(labels, matchers) for labels in scrape[name]), (
                f"{rule['alert']}: no series of {name} matches {selector}: {scrape[name][:5]}"
            )
            checked += 1
        assert names, f"{rule['alert']} uses no reqstate metric"
        for grouping in GROUPING.findall(expr):
            for label in (part.strip() for part in grouping.split(",")):
                if not label or label in TARGET_LABELS:
                    continue
                assert any(label in labels for name in names for labels in scrape[name]), (
                    f"{rule['alert']}: no metric it uses has the label {label}"
                )
    assert checked >= len(rules())


def test_the_drift_check_can_fail(scrape: dict[str, list[dict[str, str]]]) -> None:
    """A renamed metric or a label value the sidecar never sends is caught."""
    assert "reqstate_key_refusals_total" in scrape
    assert "reqstate_key_refused_total" not in scrape
    refusals = scrape["reqstate_key_refusals_total"]
    assert any(matches(labels, [("reason", "=", "retired_key")]) for labels in refusals)
    assert not any(matches(labels, [("reason", "=", "retired")]) for labels in refusals)
    assert any("sha256" in labels for labels in scrape["reqstate_keyring_info"])
