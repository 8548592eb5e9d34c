"""A private PostgreSQL for the tests: a cluster made with ``initdb`` in a folder of its own, its
server on a port free at start and its socket in that folder, so that it never touches (or
depends on) a system PostgreSQL, and two test sessions on one machine never see each other's
databases. Debian's ``postgresql`` package provides the programs (``.ci/run`` installs it; so
does :func:`ensure_packages`, as root, when they are missing).

PostgreSQL refuses to run as root: as root, the cluster's folder is given to the ``postgres``
user (Debian's package makes it) and the programs run as that user. The role the tests connect
as is ``jaxrun`` with a password (``PASSWORD``), over TCP on 127.0.0.1 with scram-sha-256, as a
team's server would ask; :meth:`PostgresCluster.database` makes a fresh database for a test.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

PACKAGES = ("postgresql",)
PROGRAMS = ("initdb", "pg_ctl", "postgres", "psql")
USER = "jaxrun"
PASSWORD = "s3cret-Pa55word"  # what no file jaxrun writes may hold (tests grep for it)
STATE_FILE = "cluster.json"
START_SECONDS = 60


class Unavailable(Exception):
    """PostgreSQL cannot run here (its programs are missing and cannot be installed)."""


def _bin_dir() -> Path | None:
    """Debian keeps the server's programs in /usr/lib/postgresql/<version>/bin (the newest)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                   if Path(p).parent.name.isdigit() else 0)
    for folder in reversed(found):
        if all((Path(folder) / p).exists() for p in PROGRAMS):
            return Path(folder)
    if all(shutil.which(p) for p in PROGRAMS):
        return Path(shutil.which("initdb")).resolve().parent  # type: ignore[arg-type]
    return None


def ensure_packages(timeout: float = 600) -> Path:
    """The folder of PostgreSQL's programs, installed with apt when missing (as CI does); raises
    Unavailable with the reason when that is impossible here."""
    found = _bin_dir()
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Unavailable("PostgreSQL is not installed, and apt-get as root is not available to install postgresql")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
            subprocess.run(cmd, check=True, capture_output=True, timeout=timeout, env=env)
    except (subprocess.SubprocessError, OSError) as exc:
        raise Unavailable(f"PostgreSQL is not installed and apt-get could not install it: {exc}") from None
    found = _bin_dir()
    if found is None:
        raise Unavailable("apt-get installed postgresql, but its programs are still not found")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresCluster:
    state_dir: Path
    bin_dir: Path
    port: int
    pid: int | None = None

    @property
    def data(self) -> Path:
        return self.state_dir / "data"

    def url(self, database: str = "postgres", password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def save(self) -> None:
        state = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.state_dir / STATE_FILE).write_text(json.dumps(state))

    @classmethod
    def load(cls, state_dir: Path) -> "PostgresCluster | None":
        try:
            state = json.loads((state_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(Path(state["state_dir"]), Path(state["bin_dir"]), int(state["port"]), state.get("pid"))

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:  # the server refuses root: its programs run as postgres
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8", "PGTZ": "UTC"})

    def create(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        secret = self.state_dir / "password"
        secret.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            postgres = pwd.getpwnam("postgres")
            os.chown(self.state_dir, postgres.pw_uid, postgres.pw_gid)
            os.chown(secret, postgres.pw_uid, postgres.pw_gid)
        done = self._run("initdb", "-D", str(self.data), "-U", USER, "--pwfile", str(secret),
                         "--auth-local", "scram-sha-256", "--auth-host", "scram-sha-256", "-E", "UTF8")
        secret.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        log = self.state_dir / "server.log"
        options = f"-p {self.port} -k {self.state_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(log), "-o", options, "-w", "-t",
                         str(START_SECONDS), "start", timeout=START_SECONDS + 30)
        if done.returncode != 0:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"the PostgreSQL server did not start: {done.stdout}{done.stderr}{text[-2000:]}")
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        self.save()

    def stop(self, mode: str = "fast") -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
        if self.pid is not None and _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)

    def restart(self) -> None:
        """Stopped (``immediate``: as a crash would) and started again on the same port."""
        self.stop("immediate")
        self.start()

    def database(self, name: str) -> str:
        """A fresh, empty database ``name`` (dropped first when it exists); its URL with the password."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shared(state_dir: Path) -> PostgresCluster:
    """The session's cluster: made and started by the first process that asks (the others wait on
    a lock), then reused."""
    state_dir = Path(state_dir)
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(state_dir.with_name(state_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failure = state_dir.with_name(state_dir.name + ".failed")
        if failure.exists():
            raise Unavailable(failure.read_text())
        cluster = PostgresCluster.load(state_dir)
        if cluster is not None and cluster.pid is not None and _alive(cluster.pid):
            return cluster
        try:
            cluster = PostgresCluster(state_dir, ensure_packages(), _free_port())
            if not cluster.data.exists():
                cluster.create()
            cluster.start()
        except (Unavailable, RuntimeError, OSError, KeyError) as exc:
            failure.write_text(str(exc))
            raise Unavailable(str(exc)) from None
        return cluster


def stop_shared(state_dir: Path) -> None:
    """Stops the session's cluster if one was started (under the lock: never during a start)."""
    state_dir = Path(state_dir)
    lock_path = state_dir.with_name(state_dir.name + ".lock")
    if not lock_path.exists():
        return
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster = PostgresCluster.load(state_dir)
        if cluster is not None:
            cluster.stop("immediate")


@contextlib.contextmanager
def private() -> Iterator[PostgresCluster]:
    """A cluster of a test's own (one it may stop, kill or restart), stopped and removed
    afterwards. Its folder is made in the system's temporary folder, which the ``postgres`` user
    can reach (a test's tmp_path, 0700 under root's, is not)."""
    import tempfile

    bin_dir = ensure_packages()
    state_dir = Path(tempfile.mkdtemp(prefix="jr-pg-", dir=os.environ.get("JR_TESTS_BASE_TMP") or None))
    cluster = PostgresCluster(state_dir, bin_dir, _free_port())
    try:
        cluster.create()
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(state_dir, ignore_errors=True)
