"""Shared fixtures: every test reads device facts from a private cache, probed once per session."""

from __future__ import annotations

import itertools
import os
import re
import secrets
import sys
from pathlib import Path

import pytest

# Subprocesses (`python -m jaxrun ...`) must run this checkout's code, like the tests themselves do
# (pyproject's pytest `pythonpath`), whichever way jaxrun was installed.
_SRC = str(Path(__file__).resolve().parents[1] / "src")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)

# ... with its bytecode compiled, as pip leaves an installed jaxrun: with PYTHONDONTWRITEBYTECODE
# set (as on the CI machine) every `python -m jaxrun` and every probe would otherwise compile
# jaxrun's modules again (~0.1 s of CPU a command, measured; hundreds of commands a session).
if not os.environ.get("PYTEST_XDIST_WORKER"):  # once, by the controller (workers start after it)
    import compileall

    compileall.compile_dir(str(Path(_SRC) / "jaxrun"), quiet=2)

# ... and so are the test modules: pytest rewrites each one's asserts on import, and with bytecode
# off it does so again in every worker of every session (about half the collection's CPU,
# measured). With bytecode off, the rewritten modules (and whatever this process imports after
# them) are cached under a folder of the system's temporary one, never in the checkout.
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    import tempfile

    _base = os.environ.get("JR_TESTS_BASE_TMP") or tempfile.gettempdir()  # a worker's TMPDIR goes with it
    sys.pycache_prefix = str(Path(_base) / f"jaxrun-tests-pycache-{os.getuid()}")
    sys.dont_write_bytecode = False

# Each test process (each pytest-xdist worker, each pytest session) gets a temporary folder of its
# own (TMPDIR, inherited by every process it starts), so that the check for processes left behind
# (below) can tell its own script runs (their event channel lives in it) from those of another
# worker or of another test session running at the same time.
# Side by side, not nested (a worker inherits the controller's TMPDIR), and short: Ray puts its
# AF_UNIX sockets under TMPDIR, and their paths may not exceed 107 bytes.
import tempfile  # noqa: E402

_BASE_TMP = os.environ.setdefault("JR_TESTS_BASE_TMP", tempfile.gettempdir())
_WORKER_TMP = tempfile.mkdtemp(prefix=f"jr-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-", dir=_BASE_TMP)
os.environ["TMPDIR"] = _WORKER_TMP
tempfile.tempdir = _WORKER_TMP


def pytest_configure(config: pytest.Config) -> None:
    # The session's Slurm (the `slurm` fixture) lives in a folder named here, by the controller,
    # before the pytest-xdist workers start: they inherit the name and so share the one cluster,
    # which the controller stops at the end (pytest_sessionfinish, pytest_unconfigure).
    if not hasattr(config, "workerinput"):
        import secrets

        os.environ["JR_TESTS_SLURM_DIR"] = str(Path(_BASE_TMP) / f"jr-slurm-{os.getpid()}-{secrets.token_hex(3)}")
        os.environ["JR_TESTS_SLURM_OWNER"] = str(os.getpid())
        # The session's PostgreSQL (the `postgres` fixture), shared by the workers the same way.
        os.environ["JR_TESTS_PG_DIR"] = str(Path(_BASE_TMP) / f"jr-pg-{os.getpid()}-{secrets.token_hex(3)}")


@pytest.fixture(scope="session")
def slurm():  # type: ignore[no-untyped-def]
    """A real single-node Slurm (tests/slurm_cluster.py) for the whole session, shared by the
    workers: ``.env`` (SLURM_CONF, to merge into a Slurm command's environment), ``.conf``,
    ``.partition``, ``.node``, ``.state_dir``. Skipped where Slurm cannot be installed."""
    import slurm_cluster

    try:
        return slurm_cluster.shared(Path(os.environ["JR_TESTS_SLURM_DIR"]),
                                    owner=int(os.environ["JR_TESTS_SLURM_OWNER"]))
    except slurm_cluster.Unavailable as exc:
        pytest.skip(str(exc))


def _stop_slurm(config: pytest.Config, *, remove: bool) -> None:
    if hasattr(config, "workerinput") or not os.environ.get("JR_TESTS_SLURM_DIR"):
        return
    import shutil

    import slurm_cluster

    state_dir = Path(os.environ["JR_TESTS_SLURM_DIR"])
    slurm_cluster.stop_shared(state_dir)
    if remove:
        shutil.rmtree(state_dir, ignore_errors=True)
        state_dir.with_name(state_dir.name + ".lock").unlink(missing_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    _stop_slurm(config, remove=True)
    _stop_postgres(config)


@pytest.fixture(scope="session")
def postgres():  # type: ignore[no-untyped-def]
    """A real PostgreSQL (tests/postgres_cluster.py) for the whole session, shared by the workers:
    ``.database(name)`` makes a fresh database and gives its URL (with the password), ``.url()``.
    Skipped where PostgreSQL cannot be installed."""
    import postgres_cluster

    try:
        return postgres_cluster.shared(Path(os.environ["JR_TESTS_PG_DIR"]))
    except postgres_cluster.Unavailable as exc:
        pytest.skip(str(exc))


_history_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_at(request: pytest.FixtureRequest, tmp_path: Path) -> "Path | str":
    """Where a fresh, empty history lives, once on each store (judge/history_db.py): an SQLite
    file's path (not made yet), or the URL (with its password) of a new database on the session's
    PostgreSQL (the ``postgres`` fixture, started only for this param). Either goes wherever a
    history's location goes: ``HistoryStore(history_at)``, ``jaxrun ... --history history_at``."""
    if request.param == "sqlite":
        return tmp_path / "history.sqlite"
    pytest.importorskip("psycopg")
    postgres = request.getfixturevalue("postgres")
    # Unique within a session (the counter) and across the pytest-xdist workers (the token).
    return postgres.database(f"history_{next(_history_databases)}_{secrets.token_hex(4)}")


def _stop_postgres(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not os.environ.get("JR_TESTS_PG_DIR"):
        return
    import shutil

    import postgres_cluster

    state_dir = Path(os.environ["JR_TESTS_PG_DIR"])
    postgres_cluster.stop_shared(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)
    for suffix in (".lock", ".failed"):
        state_dir.with_name(state_dir.name + suffix).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def jaxrun_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One folder for the whole session: the device probe costs ~1 s, so tests share its answer,
    # while the user's ~/.cache/jaxrun is never read or written.
    return tmp_path_factory.mktemp("jaxrun-cache")


@pytest.fixture(scope="session")
def jaxrun_cli(jaxrun_cache_dir: Path):  # type: ignore[no-untyped-def]
    """``python -m jaxrun`` in a real subprocess: ``jaxrun_cli.run(*args, cwd=, env=, timeout=)``
    returns a ``RunResult`` (returncode, stdout, stderr, lines); ``jaxrun_cli.but(cwd=, env=,
    without=)`` the same with other defaults. It runs this checkout's code with the session's
    device-facts cache and without the user's JAX_PLATFORMS (tests/helpers.py: jaxrun, child_env)."""
    from helpers import JaxrunCli

    return JaxrunCli(env={"JAXRUN_CACHE_DIR": str(jaxrun_cache_dir)}, without=("JAX_PLATFORMS",))


@pytest.fixture(autouse=True)
def _isolated_device_cache(jaxrun_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
    return jaxrun_cache_dir


def _leftover_processes(basetemp: Path | None) -> list[str]:
    """Processes the tests started that outlive the suite: children of this pytest process, any
    process of a script run (it carries jaxrun's channel variable), any naming the tests' folder."""
    import psutil

    from jaxrun.probe.channel import EVENTS_ENV

    me = psutil.Process()
    suspects = {p.pid: p for p in me.children(recursive=True)}
    # What started this pytest (a shell, `timeout ... --basetemp=X`) names the folder too: not ours.
    ancestors = {p.pid for p in me.parents()}
    for proc in psutil.process_iter():
        if proc.pid == me.pid or proc.pid in suspects or proc.pid in ancestors:
            continue
        try:
            environ = proc.environ()
            channel = environ.get(EVENTS_ENV)
            ours = channel is not None and channel.startswith(_WORKER_TMP)
            # A Slurm job's processes are children of the cluster's slurmstepd, never of this one;
            # they carry the TMPDIR of the process that submitted them.
            ours = ours or ("SLURM_JOB_ID" in environ and environ.get("TMPDIR", "").startswith(_WORKER_TMP))
            if ours or (basetemp and _names_folder(proc.cmdline(), basetemp)):
                suspects[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    found = []
    for proc in suspects.values():
        if proc.pid in _helpers_of(me):
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _names_folder(cmdline: list[str], folder: Path) -> bool:
    """Whether the command line names ``folder`` or a path inside it, anywhere in an argument
    (``--basetemp=/tmp/a``, ``open('/tmp/a/x')``), never /tmp/ab: another session's folder that
    only starts with the same letters."""
    pattern = re.compile(re.escape(str(folder)) + r"(?![\w.-])")
    return any(pattern.search(arg) for arg in cmdline)


def _helpers_of(me) -> set[int]:  # type: ignore[no-untyped-def]
    """Helpers of the pytest process itself (multiprocessing's resource tracker), which end with it."""
    helpers = set()
    for child in me.children():
        try:
            if "multiprocessing.resource_tracker" in " ".join(child.cmdline()):
                helpers.add(child.pid)
        except Exception:  # noqa: BLE001 - it may be gone by now
            continue
    return helpers


def _describe(proc) -> str:  # type: ignore[no-untyped-def]
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:200]}"
    except Exception:  # noqa: BLE001 - it may be gone by now
        return str(proc.pid)


_LEFT_IN_WORKERS: list[str] = []


def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    found = getattr(node, "workeroutput", {}).get("leftover_processes", ())
    _LEFT_IN_WORKERS.extend(f"{node.gateway.id}: {d}" for d in found)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite fails if any test left a process behind (checked after a moment to settle)."""
    import time

    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = factory.getbasetemp() if factory is not None else None
    deadline = time.monotonic() + 10  # a Ray shut down by the last test takes a few seconds to go
    left = _leftover_processes(basetemp)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftover_processes(basetemp)
    described = [_describe(proc) for proc in left]
    for proc in left:
        try:
            proc.kill()
        except Exception:  # noqa: BLE001 - gone already
            pass
    if hasattr(session.config, "workerinput"):
        # A pytest-xdist worker's output and exit status are not the session's: its controller
        # reports what it found (pytest_testnodedown), sent with this hook's other results.
        session.config.workeroutput["leftover_processes"] = described  # type: ignore[attr-defined]
    else:
        described += _LEFT_IN_WORKERS
    if described:
        print("\nprocesses left behind by the tests (now killed):\n  " + "\n  ".join(described))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # The session's Slurm goes after the check, which thus still sees a job left running (the
    # daemons are no processes of the tests: they fork themselves away and carry no test folder).
    _stop_slurm(session.config, remove=False)
    import shutil

    shutil.rmtree(_WORKER_TMP, ignore_errors=True)


# The real components a test skips without, each known by the words of its skip reasons
# (helpers.chrome, tests/run/test_memory.py, slurm_cluster.Unavailable and the Slurm tests,
# tests/judge/test_history.py), with the Debian packages that bring it: the suite's last line names
# the ones it could not find. Skips for what the machine is (no GPU, not root, no cgroups) are
# only counted.
_COMPONENTS = (
    ("Chromium and chromedriver", r"Chromium", "chromium chromium-driver"),
    ("GNU time", r"GNU time", "time"),
    ("Slurm", r"\bSlurm\b|slurmctld", "slurmctld slurmd slurm-client munge"),
    ("git", r"\bgit is not installed", "git"),
)
_NO_MODULE = r"could not import '([^']+)'"  # pytest.importorskip's reason


def _skip_reason(report) -> str:  # type: ignore[no-untyped-def]
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    """One line at the end: the real components (Chromium, GNU time, Slurm, an extra's Python
    package) whose tests were skipped because this machine lacks them, and how to install them."""
    import re

    if hasattr(config, "workerinput"):
        return
    skipped: dict[str, int] = {}  # component -> tests skipped without it
    packages: list[str] = []
    modules: list[str] = []
    other = 0
    for report in terminalreporter.stats.get("skipped", []):
        reason = _skip_reason(report)
        component = next((c for c in _COMPONENTS if re.search(c[1], reason)), None)
        module = re.search(_NO_MODULE, reason)
        if component is not None:
            name = component[0]
            packages += [p for p in component[2].split() if p not in packages]
        elif module is not None:
            name = f"Python's {module.group(1).split('.')[0]}"
            modules.append(name)
        else:
            other += 1
            continue
        skipped[name] = skipped.get(name, 0) + 1
    if not skipped:
        return
    order = [c[0] for c in _COMPONENTS]
    names = sorted(skipped, key=lambda n: (order.index(n) if n in order else len(order), n))
    how = [f"as root, apt-get install {' '.join(sorted(packages))} (.ci/run does)"] if packages else []
    how += ['python3 -m pip install -e ".[dev]"'] if modules else []
    more = f"; {other} more skipped for what this machine is (no GPU, not root, ...): pytest -rs says why" if other else ""
    terminalreporter.write_line(f"not found here: {', '.join(f'{n} ({skipped[n]} skipped)' for n in names)}; "
                                f"install with: {' and '.join(how)}{more}", yellow=True)
