"""Moving a history between stores: ``jaxrun history --export FILE`` writes every row as JSON lines,
the schema's own tables and columns, and ``--import FILE`` adds them to another history (SQLite or
PostgreSQL, judge/history_db.py), so a history moves from one machine's file to a team's server and
back without loss.

The file: a first line ``{"jaxrun_history": 1, "schema_version": N}``, then one line per row,
``{"table": ..., "row": {column: value}}``, the tables in the order their references need (a run
before its samples, a compile record before its programs), each in the order it was written.

An import is one transaction: all of it or nothing. Into an empty history the rows keep their ids
(the result files' ``history_run_id`` still name them); into one that holds runs they get new ids,
their references followed. A run the history already holds (its ``run_key``) is not added again,
nor what belongs to it, and neither is a compile record or a confirmation already there: importing
a file twice adds it once.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import IO, Any, Iterable, NamedTuple

from jaxrun.errors import UsageError
from jaxrun.judge.history_db import Database

FORMAT_VERSION = 1

# (table, its own key, the columns that name a row of an earlier table: column -> that table)
TABLES: tuple[tuple[str, str | None, dict[str, str]], ...] = (
    ("runs", "id", {}),
    ("samples", None, {"run_id": "runs"}),
    ("compile_runs", "id", {"history_run_id": "runs"}),
    ("programs", None, {"compile_run_id": "compile_runs"}),
    ("change_checks", "id", {}),
)
KEYS = {table: key for table, key, _ in TABLES}  # each table's own key (None: it has none)
REFERS = {table: refers for table, _, refers in TABLES}
KEYED = tuple(table for table, key in KEYS.items() if key is not None)
# What makes a row the same as one the history holds, for a table without a key of its own.
SAME_ROW = {
    "compile_runs": ("recorded_at", "script_path", "host", "content_hash"),
    "change_checks": ("checked_at", "script_path", "metric", "before_commit", "after_commit", "verdict"),
}
# What a row of each table is, for messages: "12 runs, 60 samples".
ROW_NAMES = {"runs": "run", "samples": "sample", "compile_runs": "compile record", "programs": "compiled program",
             "change_checks": "kept confirmation"}
FLUSH_ROWS = 2000  # rows of a table without a key written at once


def rows_said(counts: dict[str, int]) -> str:
    """``5 runs, 20 samples`` (tables without rows left out), or ``nothing``."""
    from jaxrun.core.formatting import plural

    return ", ".join(plural(n, ROW_NAMES[table]) for table, n in counts.items() if n) or "nothing"


class Imported(NamedTuple):
    added: dict[str, int]  # rows added, per table
    already_held: dict[str, int]  # rows the history held already, per table (runs by their run_key)
    left_out: list[str]  # "table.column" of the file this history has no column for


def _columns(db: Database, table: str) -> list[str]:
    return sorted(db.columns(table) - {"seq"})  # seq: PostgreSQL's order of rows without a key (history_db)


def export_rows(db: Database, schema_version: int, out: IO[str]) -> dict[str, int]:
    """Every row of the history, as JSON lines into ``out`` (inside one read transaction: one
    snapshot); the rows written, per table."""
    out.write(json.dumps({"jaxrun_history": FORMAT_VERSION, "schema_version": schema_version}) + "\n")
    counts = {}
    for table, key, _ in TABLES:
        columns = _columns(db, table)
        order = key or "rowid"
        cursor = db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
        counts[table] = 0
        for row in cursor:
            out.write(json.dumps({"table": table, "row": dict(zip(columns, row))}, ensure_ascii=False,
                                 allow_nan=False) + "\n")
            counts[table] += 1
    return counts


def _parsed(lines: Iterable[str], source: str, schema_version: int) -> Iterable[tuple[int, str, dict[str, Any]]]:
    """(line number, table, row) of an export; a line that is not one is a UsageError naming it."""
    header = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{source} line {number} is not JSON ({exc}); give a file `jaxrun history --export` "
                             "wrote") from None
        if not header:
            header = True
            if not isinstance(item, dict) or item.get("jaxrun_history") != FORMAT_VERSION:
                raise UsageError(f"{source} is not a history export of jaxrun (its first line names none); give a "
                                 "file `jaxrun history --export` wrote")
            version = item.get("schema_version")
            if not isinstance(version, int) or version > schema_version:
                raise UsageError(f"{source} was exported by a newer jaxrun (schema {version} > {schema_version}); "
                                 "upgrade jaxrun to import it")
            continue
        if not (isinstance(item, dict) and item.get("table") in KEYS
                and isinstance(item.get("row"), dict)):
            raise UsageError(f"{source} line {number} is not a row of the history's tables "
                             f"({', '.join(KEYS)})")
        key = KEYS[item["table"]]
        if key is not None and (not isinstance(item["row"].get(key), int) or isinstance(item["row"][key], bool)):
            raise UsageError(f"{source} line {number}: a row of {item['table']} without its {key} (a whole "
                             "number); give a file `jaxrun history --export` wrote")
        yield number, item["table"], item["row"]
    if not header:
        raise UsageError(f"{source} is empty; give a file `jaxrun history --export` wrote")


def import_rows(db: Database, lines: Iterable[str], source: str, schema_version: int) -> Imported:
    """Add the rows of an export to the history (the caller holds the write transaction)."""
    columns = {table: set(_columns(db, table)) for table, _, _ in TABLES}
    keep_ids = not any(db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in KEYED)
    held_keys = {row[0]: int(row[1]) for row in db.execute("SELECT run_key, id FROM runs WHERE run_key IS NOT NULL")}
    held_same = {table: {tuple(row) for row in db.execute(f"SELECT {', '.join(names)} FROM {table}")}
                 for table, names in SAME_ROW.items()}
    new_ids: dict[str, dict[int, int]] = {table: {} for table in KEYED}
    skipped: dict[str, set[int]] = {table: set() for table in KEYED}  # ids of rows the history held already
    added = {table: 0 for table, _, _ in TABLES}
    already = {table: 0 for table, _, _ in TABLES}
    left_out: set[str] = set()
    pending: dict[str, tuple[list[str], list[list[Any]]]] = {}

    def flush(table: str) -> None:
        names, rows = pending.pop(table, ([], []))
        if rows:
            db.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", rows)

    def add(number: int, table: str, row: dict[str, Any]) -> None:
        key, refers = KEYS[table], REFERS[table]
        left_out.update(f"{table}.{c}" for c in row if c not in columns[table])
        row = {c: v for c, v in row.items() if c in columns[table]}
        duplicate = False
        for column, target in refers.items():
            old = row.get(column)
            if old is None:
                continue
            if old in skipped[target]:
                duplicate = True
            elif old in new_ids[target]:
                row[column] = new_ids[target][old]
            elif target == "runs" and table == "compile_runs":
                row[column] = None  # a compile record of a run the file does not hold
            else:
                raise UsageError(f"{source} line {number}: a row of {table} names {target} {old}, which the file does "
                                 "not hold before it; give a whole file `jaxrun history --export` wrote")
        if table == "runs":
            if row.get("run_key") is None:
                row["run_key"] = uuid.uuid4().hex  # exported before runs had keys
            duplicate = row["run_key"] in held_keys
            if duplicate:
                new_ids["runs"][row["id"]] = held_keys[row["run_key"]]
        if table in SAME_ROW:
            same = tuple(row.get(c) for c in SAME_ROW[table])
            duplicate = duplicate or same in held_same[table]
            held_same[table].add(same)
        if duplicate:
            already[table] += 1
            if key is not None:
                skipped[table].add(row[key])
            return
        added[table] += 1
        if key is None:
            names = sorted(row)
            batch = pending.setdefault(table, (names, []))
            if batch[0] != names:
                flush(table)
                batch = pending.setdefault(table, (names, []))
            batch[1].append([row[c] for c in names])
            if len(batch[1]) >= FLUSH_ROWS:
                flush(table)
            return
        for earlier in list(pending):
            flush(earlier)  # a keyed row may be named by rows after it: what precedes it is written first
        old_id = row.pop(key)
        if keep_ids:
            row[key] = old_id
        names = sorted(row)
        new_ids[table][old_id] = db.insert(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", [row[c] for c in names])
        if table == "runs":
            held_keys[row["run_key"]] = new_ids[table][old_id]

    for number, table, row in _parsed(lines, source, schema_version):
        try:
            add(number, table, row)
        except sqlite3.DatabaseError as exc:  # a value the table refuses (a missing column, a wrong type)
            raise UsageError(f"{source} line {number}: the history refused the row of {table} ({exc}); nothing "
                             "was imported") from None
    try:
        for table in list(pending):
            flush(table)
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{source}: the history refused a row of {table} ({exc}); nothing was imported") from None
    if keep_ids:
        for table in KEYED:
            db.keys_taken(table)
    if any(added.values()):
        db.execute("ANALYZE")  # the planner's statistics of the tables just filled (PostgreSQL's would wait for autovacuum)
    return Imported(added, already, sorted(left_out))
