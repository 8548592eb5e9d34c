"""A damaged history file: :func:`integrity_check` (what SQLite finds wrong with it) and
:func:`repair` (every row SQLite can still read copied into a fresh database, the damaged file kept
beside it), for ``jaxrun history --check`` and ``--repair``."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from jaxrun.errors import UsageError
from jaxrun.judge.history import BUSY_TIMEOUT_SECONDS, HistoryStore


def _existing(path: str | os.PathLike[str]) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise UsageError(f"no history database at {str(path)!r}; pass --history PATH")
    return path


def integrity_check(path: str | os.PathLike[str]) -> list[str]:
    """SQLite's ``PRAGMA integrity_check`` of the history at ``path``: its findings, ``[]`` when
    the file is sound. A file SQLite cannot check at all is one finding (its message)."""
    path = _existing(path)
    try:
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS)
    except sqlite3.Error as exc:
        return [str(exc)]
    # SQLite may stop with an error after a finding, and Python's sqlite3 then loses the rows it
    # had: ask for 1, 2, 4, ... findings, keeping the last full answer and the error that ended it.
    rows: list[str] = []
    limit = 1
    try:
        while True:
            try:
                found = [str(r[0]) for r in db.execute(f"PRAGMA integrity_check({limit})").fetchall()]
            except sqlite3.Error as exc:
                rows.append(str(exc))
                break
            rows = found
            if found == ["ok"] or len(found) < limit or limit >= 1024:
                break
            limit *= 2
    finally:
        db.close()
    return [] if rows == ["ok"] else [line for row in rows for line in row.splitlines()]


class Repaired(NamedTuple):
    path: Path  # the new database, where the old one was
    damaged: Path  # the old file, renamed
    runs: int
    samples: int
    unreadable: list[str]  # "table: what could not be read"


def _readable_rows(db: sqlite3.Connection, table: str, lost: list[str]) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` SQLite can still read, in rowid order: a damaged page is stepped
    over (the first readable rowid past it found by a doubling then a bisecting search)."""
    quoted = '"' + table.replace('"', '""') + '"'
    after: int | None = None  # the last rowid read (None: from the start)
    while True:
        where, params = ("", []) if after is None else (" WHERE rowid > ?", [after])
        try:
            for row in db.execute(f"SELECT rowid, * FROM {quoted}{where} ORDER BY rowid", params):
                after = row[0]
                yield row
            return
        except sqlite3.DatabaseError as exc:
            start = after if after is not None else -(2 ** 63)

            def readable(low: int) -> bool:
                try:
                    db.execute(f"SELECT rowid, * FROM {quoted} WHERE rowid > ? ORDER BY rowid LIMIT 1", [low]).fetchall()
                    return True
                except sqlite3.DatabaseError:
                    return False

            step, past = 1, None
            while start + step < 2 ** 63:
                if readable(start + step):
                    past = start + step
                    break
                step *= 2
            lost.append(f"{table}: rows after rowid {after if after is not None else 'the start'} ({exc})")
            if past is None:
                return
            low = start + step // 2  # unreadable from here; readable from past: the smallest readable
            while past - low > 1:
                middle = (low + past) // 2
                if readable(middle):
                    past = middle
                else:
                    low = middle
            after = past


def repair(path: str | os.PathLike[str]) -> Repaired:
    """Save what SQLite can still read of the history at ``path`` into a new database at
    ``path``; the old file is kept beside it as ``<name>.damaged-<timestamp>``. Tables and indexes
    are made again from the old file's own schema; every row that can be read is copied; samples
    whose run was lost are left out."""
    path = _existing(path)
    source = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = path.with_name(f"{path.name}.repairing-{stamp}")
    lost: list[str] = []
    try:
        try:
            schema = source.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
                " ORDER BY type = 'index', rowid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"nothing can be saved from {str(path)!r}: SQLite cannot read its list of tables ({exc})") from None
        names = {name for kind, name, _ in schema if kind == "table"}
        if not {"meta", "runs", "samples"} <= names:
            raise UsageError(f"{str(path)!r} is not a jaxrun history database (tables: {', '.join(sorted(names)) or 'none'})")
        target = sqlite3.connect(str(fresh), isolation_level=None)
        try:
            target.execute("BEGIN")
            for kind, _, sql in schema:
                if kind == "table":
                    target.execute(sql)
            counts: dict[str, int] = {}
            run_ids: set[int] = set()
            compile_run_ids: set[int] = set()
            for table in ("meta", "runs", "samples", "compile_runs", "programs", "change_checks"):
                if table not in names:
                    continue  # a database from before schema 6
                columns = [r[1] for r in source.execute(f"PRAGMA table_info({table})").fetchall()]
                insert = (f"INSERT INTO {table} (rowid, {', '.join(columns)}) "
                          f"VALUES (?{', ?' * len(columns)})")
                n = 0
                run_at = columns.index("run_id") + 1 if table == "samples" else None
                owner_at = columns.index("compile_run_id") + 1 if table == "programs" else None
                for row in _readable_rows(source, table, lost):
                    if run_at is not None and row[run_at] not in run_ids:
                        continue  # its run was lost: a sample of nothing
                    if owner_at is not None and row[owner_at] not in compile_run_ids:
                        continue  # a program of a lost run
                    if table == "compile_runs":
                        linked = columns.index("history_run_id") + 1
                        if row[linked] is not None and row[linked] not in run_ids:
                            row = (*row[:linked], None, *row[linked + 1:])  # its benchmarked run was lost
                        compile_run_ids.add(row[0])
                    target.execute(insert, row)
                    if table == "runs":
                        run_ids.add(row[0])
                    n += 1
                counts[table] = n
            for kind, _, sql in schema:
                if kind != "table":
                    target.execute(sql)
            target.execute("COMMIT")
        finally:
            target.close()
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    try:
        HistoryStore(fresh).close()  # what jaxrun will open: brought up to this schema, in WAL mode
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    damaged = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, damaged)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, damaged.with_name(damaged.name + suffix))
    os.replace(fresh, path)
    for suffix in ("-wal", "-shm"):
        fresh.with_name(fresh.name + suffix).unlink(missing_ok=True)
    return Repaired(path, damaged, counts["runs"], counts["samples"], lost)
