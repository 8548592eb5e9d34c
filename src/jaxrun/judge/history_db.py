"""Where a history lives: an SQLite file (one machine) or a PostgreSQL database (a team's CI
runners and cluster nodes writing at once, through psycopg 3: ``jaxrun[postgres]``). The store
(judge/history.py), its schema (judge/history_schema.py) and the compile records
(judge/compile_history.py) write SQLite's SQL once; the dialect of PostgreSQL is this module's
alone: ``?`` placeholders, null-safe ``IS ?``, the key columns, the order rows were written in
(SQLite's ``rowid``: a ``seq`` column there), the tables and columns a database holds, the lock a
migration takes.

A location is a path, or a URL ``postgresql://user:password@host:port/database`` (libpq's
``PGPASSWORD``, ``~/.pgpass`` and service files work as libpq's users expect). A URL is shown
with its password replaced by ``***`` (:func:`shown_location`) in every message and file.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any, Iterable, Sequence

from jaxrun.core.paths import is_history_url
from jaxrun.errors import UsageError

CONNECT_SECONDS = 10  # a server that does not answer: one line after this, never a hang
# Every migration takes this lock (pg_advisory_xact_lock): a newer jaxrun's migration runs once.
MIGRATION_LOCK = 0x6A6178_72756E  # "jaxrun"


def shown_location(location: str | os.PathLike[str]) -> str:
    """A history's location as messages and files say it: a URL's password as ``***``."""
    text = os.fspath(location)
    if not is_history_url(text):
        return text
    text = re.sub(r"^(postgres(?:ql)?://[^:/@]*):[^@/]*@", r"\1:***@", text)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", text)  # libpq takes it as a parameter too


def _said(exc: Exception, url: str) -> str:
    """psycopg's message on one line, the URL in it (and so its password) as shown."""
    return " ".join(str(exc).split()).replace(url, shown_location(url))


class Database:
    """One connection to a history, SQLite's or PostgreSQL's: ``execute`` and ``executemany`` take
    SQLite's SQL and ``?`` placeholders whatever the dialect; a write is ``begin(write=True)``
    then ``commit``."""

    dialect = "sqlite"

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def sql(self, text: str) -> str:
        return text

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        return self.connection.execute(self.sql(text), params)

    def executemany(self, text: str, rows: Iterable[Sequence[Any]]) -> None:
        self.connection.executemany(self.sql(text), list(rows))

    def insert(self, text: str, params: Sequence[Any]) -> int:
        """An INSERT into a table with an ``id`` key; the id it got (SQLite's last row id: RETURNING
        needs SQLite 3.35, newer than some systems' Python is built with)."""
        return int(self.execute(text, params).lastrowid)

    def begin(self, write: bool) -> None:
        # IMMEDIATE: the write lock at once, so two writers never both read then both fail to write.
        self.connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def commit(self) -> None:
        self.connection.execute("COMMIT")

    def rollback(self) -> None:
        self.connection.execute("ROLLBACK")

    def tables(self) -> set[str]:
        return {row[0] for row in self.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.connection.execute(f"PRAGMA table_info({table})")}

    def lock_migration(self) -> None:
        """Inside a write: only one process migrates (SQLite's write lock already says so)."""

    def keys_taken(self, table: str) -> None:
        """After rows were written with their own ids: the next row's id comes after them (SQLite's
        AUTOINCREMENT sees to it itself)."""

    def close(self) -> None:
        self.connection.close()


_PLACEHOLDER = re.compile(r"\bIS NOT \?|\bIS \?|\?")
_KEY = "INTEGER PRIMARY KEY AUTOINCREMENT"


class HistoryDatabaseError(sqlite3.DatabaseError):
    """A PostgreSQL history failed a query (the server went away, a constraint): raised as
    SQLite's error class, so that every caller that notes an unreadable history and goes on
    (outputs/history_sink.py, the CLI) does so for both stores. Its message never holds the
    password."""


class PostgresDatabase(Database):
    """PostgreSQL through psycopg 3, in autocommit mode with explicit transactions, as SQLite's."""

    dialect = "postgresql"

    def __init__(self, connection: Any, url: str) -> None:
        super().__init__(connection)
        self.url = url

    def _run(self, action: Any) -> Any:
        import psycopg

        try:
            return action()
        except psycopg.Error as exc:
            said = _said(exc, self.url)
            raise HistoryDatabaseError(f"PostgreSQL: {said}") from None

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        return self._run(lambda: self.connection.execute(self.sql(text), params))

    def insert(self, text: str, params: Sequence[Any]) -> int:
        return int(self.execute(text + " RETURNING id", params).fetchone()[0])

    def commit(self) -> None:
        self._run(lambda: self.connection.execute("COMMIT"))

    def rollback(self) -> None:
        import psycopg

        try:
            self.connection.execute("ROLLBACK")
        except psycopg.Error:
            pass  # the connection is gone: so is its transaction

    def sql(self, text: str) -> str:
        text = text.replace("%", "%%")
        text = _PLACEHOLDER.sub(lambda m: {"IS NOT ?": "IS DISTINCT FROM %s", "IS ?": "IS NOT DISTINCT FROM %s"}
                                .get(m.group(0), "%s"), text)
        if text.lstrip().upper().startswith("CREATE TABLE"):
            text = text.replace(_KEY, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
            text = re.sub(r"\bREAL\b", "DOUBLE PRECISION", text)
            if " id " not in text.split("(", 1)[1][:40]:  # a table without its own key keeps the order rows came in
                text = text.replace("(", "(seq BIGINT GENERATED ALWAYS AS IDENTITY, ", 1)
        elif text.lstrip().upper().startswith("ALTER TABLE"):
            text = re.sub(r"\bREAL\b", "DOUBLE PRECISION", text)
        return re.sub(r"\browid\b", "seq", text)

    def executemany(self, text: str, rows: Iterable[Sequence[Any]]) -> None:
        def run() -> None:
            with self.connection.cursor() as cursor:
                cursor.executemany(self.sql(text), list(rows))

        self._run(run)

    def begin(self, write: bool) -> None:
        # A read sees one snapshot for all its queries, as SQLite's read transaction does.
        self._run(lambda: self.connection.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))

    def keys_taken(self, table: str) -> None:
        self.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false)")

    def tables(self) -> set[str]:
        return {row[0] for row in self._run(lambda: self.connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"))}

    def columns(self, table: str) -> set[str]:
        return {row[0] for row in self._run(lambda: self.connection.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s", (table,)))}

    def lock_migration(self) -> None:
        self._run(lambda: self.connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,)))


class HistoryUnreachable(UsageError):
    """A PostgreSQL history's server could not be connected to: one line, the password never in
    it; ``problem`` is ``<location>: <why>``, as a batch notes a history it lost."""

    def __init__(self, location: str, detail: str) -> None:
        self.location, self.detail = location, detail
        super().__init__(f"cannot reach the history {location!r}: {detail}; check the URL, the server and its "
                         "password (PGPASSWORD or ~/.pgpass)")

    @property
    def problem(self) -> str:
        return f"{self.location}: {self.detail}"


def connect_postgres(url: str) -> PostgresDatabase:
    """A connection to the history at ``url``, within :data:`CONNECT_SECONDS`; a
    :class:`HistoryUnreachable` when it cannot be had."""
    from jaxrun.core.extras import require

    require("postgres")
    import psycopg

    try:
        connection = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_SECONDS)
    except psycopg.Error as exc:
        raise HistoryUnreachable(shown_location(url), _said(exc, url)) from None
    return PostgresDatabase(connection, url)
