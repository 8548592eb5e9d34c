"""Fixtures of the judge layer's tests: a fresh, empty history on each store."""

from __future__ import annotations

import itertools
import secrets
from pathlib import Path

import pytest

_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_at(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a fresh, empty history lives, once on each store (judge/history_db.py): an SQLite
    file's path (not made yet), or the URL (with its password) of a new database on the session's
    PostgreSQL (the ``postgres`` fixture, started only for this param). Either goes wherever a
    history's location goes: ``HistoryStore(history_at)``, ``jaxrun ... --history history_at``."""
    if request.param == "sqlite":
        return tmp_path / "history.sqlite"
    pytest.importorskip("psycopg")
    postgres = request.getfixturevalue("postgres")
    # Unique within a session (the counter) and across the pytest-xdist workers (the token).
    return postgres.database(f"history_{next(_databases)}_{secrets.token_hex(4)}")
