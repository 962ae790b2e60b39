"""`python -m reqstate mint|verify` (docs/CLI.md)."""

from __future__ import annotations

from ._cli import main

raise SystemExit(main())
