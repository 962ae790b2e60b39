"""One version: the installed distribution's metadata is reqstate_client.__version__."""

from __future__ import annotations

import re
from importlib.metadata import version

from conftest import PACKAGE_ROOT

import reqstate_client


def test_distribution_metadata_is_the_package_version() -> None:
    assert version("reqstate-client") == reqstate_client.__version__


def test_pyproject_has_no_version_of_its_own() -> None:
    text = (PACKAGE_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", project, re.MULTILINE), "the version lives in reqstate_client.__version__"
    assert re.search(r'^dynamic\s*=\s*\[[^]]*"version"', project, re.MULTILINE)
    assert 'version = { attr = "reqstate_client.__version__" }' in text
