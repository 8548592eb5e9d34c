"""The one UTC timestamp helper: every ``*_at`` / ``*_timestamp`` field and log line uses it."""

from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    """Now, in UTC, as ISO 8601 with milliseconds (``2026-11-22T22:48:48.123+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
