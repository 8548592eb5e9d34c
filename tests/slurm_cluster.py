"""A private single-node Slurm for the tests: slurmctld, slurmd and a munged of its own, all under
one state folder, on ports free at start, so that it never touches (or depends on) a system Slurm
or munge, and two test sessions on one machine never see each other's jobs.

Callers pass ``cluster.env`` (``SLURM_CONF``) to the Slurm commands they run; sbatch's jobs
inherit the submitting environment, so everything a job starts reaches the same cluster.

With no accounting storage (there is no slurmdbd), ``sacct`` has nothing to read: a job's final
state comes from ``scontrol show job`` (MinJobAge keeps finished jobs there for the session).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
COMMANDS = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel", "sdiag", "munged")
PARTITION = "debug"
STATE_FILE = "cluster.json"
# A path Slurm's own tools search for commands; the daemons run with this PATH, nothing more.
DAEMON_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Unavailable(Exception):
    """Slurm cannot run here (its packages are missing and cannot be installed)."""


class StartFailed(RuntimeError):
    """The daemons were started but the node never became usable."""


def missing_commands() -> list[str]:
    return [c for c in COMMANDS if shutil.which(c, path=os.environ.get("PATH", "") + os.pathsep + DAEMON_PATH) is None]


def ensure_packages(timeout: float = 600) -> None:
    """Installs Slurm and munge with apt when a command is missing (as CI does); raises
    Unavailable with the reason when that is impossible here."""
    missing = missing_commands()
    if not missing:
        return
    why = f"Slurm is not installed (missing {', '.join(missing)})"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Unavailable(f"{why}, and apt-get as root is not available to install {' '.join(PACKAGES)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
            done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout)
            if done.returncode != 0:
                raise Unavailable(f"{why}; `{' '.join(cmd)}` failed: {done.stderr.strip()[-500:]}")
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"{why}; `{' '.join(exc.cmd)}` took over {timeout:.0f} s") from None
    if missing_commands():
        raise Unavailable(f"{why}; still missing after apt-get install: {', '.join(missing_commands())}")


def _free_ports(count: int) -> list[int]:
    # All bound at once so that they differ; another process may still take one before the
    # daemons bind it, which then fails the start with a clear log line (not a silent mix-up).
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _real_memory_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


@dataclass
class SlurmCluster:
    state_dir: Path
    node: str
    ctld_port: int
    slurmd_port: int
    cpus: int
    real_memory_mib: int
    partition: str = PARTITION
    pids: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    extra: tuple[str, ...] = ()  # more slurm.conf lines, for a test's own cluster (MaxArraySize=3)

    # --- paths -------------------------------------------------------------------------------------

    @property
    def conf(self) -> Path:
        return self.state_dir / "etc" / "slurm.conf"

    @property
    def socket_dir(self) -> Path:
        """Where the unix sockets live: munged's, and the ones slurmd makes per job step in its spool
        ("<node>_<job>.<step>"). A socket's path holds at most 107 bytes, so a state folder deep in
        a long TMPDIR (a test's tmp_path) puts them in a short folder of their own under /tmp,
        named after the state folder and removed by stop()."""
        longest = len(os.fsencode(os.path.abspath(self.state_dir))) + len("/spool/") + len(self.node) + 24
        if longest <= 107:
            return self.state_dir
        digest = hashlib.sha256(os.fsencode(os.path.abspath(self.state_dir))).hexdigest()[:16]
        return Path("/tmp") / f"jaxrun-slurm-{digest}"

    @property
    def munge_socket(self) -> Path:
        return self.socket_dir / "run" / "munge.socket"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach this cluster (merge it into the caller's environment)."""
        return {"SLURM_CONF": str(self.conf)}

    def _pid_file(self, daemon: str) -> Path:
        return self.state_dir / "run" / f"{daemon}.pid"

    def _log(self, daemon: str) -> Path:
        return self.state_dir / "log" / f"{daemon}.log"

    # --- the configuration -------------------------------------------------------------------------

    def slurm_conf(self) -> str:
        d = self.state_dir
        return "\n".join([
            "ClusterName=jaxruntests",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # The private munged: Slurm's commands, daemons and steps all reach it by this socket.
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={self.socket_dir / 'spool'}",
            f"SlurmctldPidFile={self._pid_file('slurmctld')}",
            f"SlurmdPidFile={self._pid_file('slurmd')}",
            f"SlurmctldLogFile={self._log('slurmctld')}",
            f"SlurmdLogFile={self._log('slurmd')}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # No cgroups in a container: processes are tracked through /proc, tasks not confined.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SchedulerType=sched/backfill",
            # A submitted batch job waits for the scheduler's next pass: 1 s apart with no delay,
            # 3 s apart by default (measured).
            "SchedulerParameters=batch_sched_delay=0",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            # Memory sampled each second; a step whose tasks' RSS passes its --mem is killed.
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=1",
            "JobAcctGatherParams=OverMemoryKill",
            # Finished jobs stay visible to `scontrol show job` (state, reason) for the session.
            # A job that names no --mem gets its share of the node (not the whole node, Slurm's
            # default, which would run one job at a time).
            f"DefMemPerCPU={self.real_memory_mib // self.cpus}",
            "MinJobAge=3600",
            "KillWait=2",
            "OverTimeLimit=0",
            "InactiveLimit=0",
            "ReturnToService=2",
            *self.extra,
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.real_memory_mib} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ])

    def daemon_env(self) -> dict[str, str]:
        # Nothing of the starting process (its TMPDIR, its test variables): the daemons and the
        # slurmstepd they fork belong to the cluster, not to the test that happened to start it.
        tmp = self.state_dir / "tmp"
        return {"PATH": DAEMON_PATH, "SLURM_CONF": str(self.conf), "TMPDIR": str(tmp), "LANG": "C.UTF-8"}

    # --- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def create(cls, state_dir: Path) -> SlurmCluster:
        ctld, slurmd = _free_ports(2)
        return cls(state_dir=Path(state_dir), node=socket.gethostname().split(".")[0], ctld_port=ctld,
                   slurmd_port=slurmd, cpus=os.cpu_count() or 1, real_memory_mib=_real_memory_mib())

    def start(self, idle_timeout: float = 60) -> None:
        """Starts munged, slurmctld and slurmd, then waits (at most ``idle_timeout`` s) for the
        node to be idle; on failure stops what it started and raises StartFailed with the logs."""
        ensure_packages()
        began = time.monotonic()
        d = self.state_dir
        d.mkdir(parents=True, exist_ok=True)
        # munged refuses a socket in a folder others cannot traverse, and a key others can read.
        d.chmod(0o755)
        for sub, mode in (("etc", 0o755), ("run", 0o755), ("log", 0o755), ("state", 0o700),
                          ("spool", 0o755), ("tmp", 0o1777), ("munge", 0o700)):
            (d / sub).mkdir(exist_ok=True)
            (d / sub).chmod(mode)
        if self.socket_dir != d:
            # Named after this state folder: one left there is this folder's own, from a cluster
            # that did not stop; a link there is someone else's and is refused.
            if self.socket_dir.is_symlink():
                raise StartFailed(f"{self.socket_dir} is a symbolic link; remove it to start a cluster in {d}")
            for folder in (self.socket_dir, self.socket_dir / "run", self.socket_dir / "spool"):
                folder.mkdir(exist_ok=True)
                folder.chmod(0o755)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(self.slurm_conf())
        self.save()
        env = self.daemon_env()
        try:
            self._run_daemon("munged", [
                "munged", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                f"--log-file={self._log('munged')}", f"--pid-file={self._pid_file('munged')}",
                f"--seed-file={d / 'munge' / 'munged.seed'}"], env)
            self._run_daemon("slurmctld", ["slurmctld", "-i"], env)
            self._run_daemon("slurmd", ["slurmd"], env)
            self.timings["daemons_started_s"] = round(time.monotonic() - began, 3)
            self.save()
            self.wait_idle(idle_timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["idle_s"] = round(time.monotonic() - began, 3)
        self.save()

    def _run_daemon(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        # Each daemon forks itself away (its parent exits at once), so it is no child of the test
        # process; it is then known by its pid file alone.
        pid_file = self._pid_file(name)
        done = subprocess.run(cmd, check=False, env=env, cwd=self.state_dir, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise StartFailed(f"{name} failed to start (exit {done.returncode}): {done.stderr.strip()}\n"
                              + self._log_tail(name))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                pid = int(pid_file.read_text().strip())
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid, name):
                self.pids[name] = pid
                self.save()
                return
            time.sleep(0.05)
        raise StartFailed(f"{name} wrote no pid file of a live process in 10 s\n" + self._log_tail(name))

    def run(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster (with this process's environment)."""
        done = subprocess.run(list(args), check=False, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)
        return done

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", timeout=15, check=False)
        return done.stdout.strip() if done.returncode == 0 else f"(sinfo failed: {done.stderr.strip()})"

    def scheduler_cycles(self) -> int:
        """How many passes slurmctld's main scheduler made (sdiag); -1 when unknown."""
        done = self.run("sdiag", timeout=15, check=False)
        for line in done.stdout.splitlines():  # the main scheduler's section comes first
            if line.strip().startswith("Total cycles:"):
                return int(line.split(":")[1])
        return -1

    def wait_idle(self, timeout: float = 60) -> None:
        """Waits for the node to be idle and the scheduler to have made its first pass (~3 s
        after slurmctld starts: a job submitted before it waits for it)."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            for name, pid in self.pids.items():
                if not _alive(pid, name):
                    raise StartFailed(f"{name} (pid {pid}) died while the node came up\n" + self._log_tail(name))
            state = self.node_state()
            if state == "idle" and self.scheduler_cycles() > 0:
                return
            time.sleep(0.2)
        raise StartFailed(f"node {self.node} not idle after {timeout:.0f} s (sinfo: {state!r}, main scheduler "
                          f"cycles: {self.scheduler_cycles()})\n"
                          + "".join(self._log_tail(n) for n in ("slurmctld", "slurmd")))

    def _log_tail(self, name: str, lines: int = 15) -> str:
        try:
            tail = self._log(name).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"({self._log(name)} absent)\n"
        return f"--- {self._log(name)} ---\n" + "\n".join(tail) + "\n"

    def stop(self, timeout: float = 10) -> None:
        """Cancels what is left in the queue, stops the daemons this cluster started (by pid, SIGTERM,
        then SIGKILL past ``timeout``), and kills any job step still running under its config."""
        began = time.monotonic()
        if self.pids.get("slurmctld") and _alive(self.pids["slurmctld"], "slurmctld"):
            try:
                self.run("scancel", "--full", "-p", self.partition, timeout=15, check=False)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    queue = self.run("squeue", "-h", "-o", "%i", timeout=15, check=False)
                    if queue.returncode != 0 or not queue.stdout.strip():
                        break
                    time.sleep(0.2)
            except subprocess.TimeoutExpired:
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.get(name)
            if pid:
                _terminate(pid, name, timeout)
        # A step whose slurmd is gone lingers (slurmstepd outlives slurmd by design): anything
        # still running under this cluster's config goes too.
        for pid in _processes_with_env("SLURM_CONF", str(self.conf)):
            _terminate(pid, None, 2)
        if self.socket_dir != self.state_dir and self.socket_dir.is_dir() and not self.socket_dir.is_symlink():
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        self.pids = {}
        self.timings["stop_s"] = round(time.monotonic() - began, 3)
        self.save()

    # --- the controller alone: an outage, as a crash or an operator's restart makes one -------------

    def stop_controller(self, timeout: float = 10) -> None:
        """SIGTERM to slurmctld (SIGKILL past ``timeout``); slurmd and the job steps it runs go on,
        as on a cluster whose controller went down."""
        pid = self.pids.pop("slurmctld", None)
        if pid:
            _terminate(pid, "slurmctld", timeout)
        self.save()

    def start_controller(self, timeout: float = 60) -> None:
        """slurmctld again, from its saved state (the jobs it knew, running or waiting, recovered);
        waits (at most ``timeout`` s) until it answers and the node registered again (until then
        Slurm refuses new jobs: "Requested node configuration is not available")."""
        self._run_daemon("slurmctld", ["slurmctld", "-i"], self.daemon_env())
        self.save()
        deadline = time.monotonic() + timeout
        state = ""
        while True:
            if "is UP" in self.run("scontrol", "ping", timeout=15, check=False).stdout:
                state = self.node_state()
                if state in ("idle", "mixed", "allocated") and self.run(
                        "sbatch", "--test-only", "--wrap", "true", timeout=15, check=False).returncode == 0:
                    return
            if time.monotonic() > deadline:
                raise StartFailed(f"slurmctld restarted, but its node is {state or 'unknown'} after {timeout:.0f} s\n"
                                  + self._log_tail("slurmctld"))
            time.sleep(0.2)

    # --- the state file ----------------------------------------------------------------------------

    def save(self) -> None:
        data = asdict(self)
        data["state_dir"] = str(self.state_dir)
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.state_dir / STATE_FILE)

    @classmethod
    def load(cls, state_dir: Path) -> SlurmCluster | None:
        try:
            data = json.loads((Path(state_dir) / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        data["state_dir"] = Path(data["state_dir"])
        return cls(**data)


# --- processes -------------------------------------------------------------------------------------

def _alive(pid: int, name: str | None) -> bool:
    """Whether ``pid`` is a live (not zombie) process of that name: a pid file's number may be
    another process's by now."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    comm, _, rest = stat.partition("(")[2].rpartition(")")
    if rest.split()[0] == "Z":
        return False
    return name is None or comm == name[:15]


def _terminate(pid: int, name: str | None, timeout: float) -> None:
    if not _alive(pid, name):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid, name):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while _alive(pid, name) and time.monotonic() < deadline:
        time.sleep(0.05)


def _processes_with_env(name: str, value: str) -> list[int]:
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@contextlib.contextmanager
def private(state_dir: Path, extra: tuple[str, ...] = (), idle_timeout: float = 60) -> Iterator[SlurmCluster]:
    """A cluster of one test's own (one that takes its node or controller down, or configures it
    otherwise: ``extra`` slurm.conf lines), stopped and removed afterwards."""
    cluster = SlurmCluster.create(Path(state_dir))
    cluster.extra = tuple(extra)
    try:
        cluster.start(idle_timeout)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.state_dir, ignore_errors=True)


# --- one cluster shared by the processes of a test session -----------------------------------------

def shared(state_dir: Path, owner: int | None = None, idle_timeout: float = 60) -> SlurmCluster:
    """The session's cluster: started by the first process that asks (the others wait on a lock),
    then reused. A failure is recorded so the other processes report it without starting again.
    ``owner``: the pid of the process that stops it at the end; should that process die without
    doing so (SIGKILL, SIGTERM), a watchdog stops the cluster."""
    state_dir = Path(state_dir)
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(state_dir.with_name(state_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failure = state_dir / "failed.json"
        if failure.exists():
            kind, message = json.loads(failure.read_text())
            raise (Unavailable if kind == "unavailable" else StartFailed)(message)
        cluster = SlurmCluster.load(state_dir)
        if cluster is not None and cluster.pids and all(_alive(p, n) for n, p in cluster.pids.items()):
            return cluster
        cluster = SlurmCluster.create(state_dir)
        try:
            cluster.start(idle_timeout)
        except (Unavailable, StartFailed) as exc:
            failure.write_text(json.dumps(["unavailable" if isinstance(exc, Unavailable) else "failed", str(exc)]))
            raise
        if owner is not None:
            _spawn_watchdog(cluster, owner)
        return cluster


def stop_shared(state_dir: Path) -> SlurmCluster | None:
    """Stops the session's cluster if one was started (under the lock: never during a start)."""
    state_dir = Path(state_dir)
    lock_path = state_dir.with_name(state_dir.name + ".lock")
    if not lock_path.exists():
        return None
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster = SlurmCluster.load(state_dir)
        if cluster is not None:
            cluster.stop()
        return cluster


def _spawn_watchdog(cluster: SlurmCluster, owner: int) -> None:
    # Started through an intermediate that exits at once, so that the watchdog is nobody's child
    # (the test process's check for processes left behind looks at its children).
    cmd = [sys.executable, __file__, "watch", str(owner), str(cluster.state_dir)]
    launcher = ("import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True,"
                " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    subprocess.run([sys.executable, "-c", launcher, *cmd], env=cluster.daemon_env(), timeout=30, check=True)


def _watch(owner: int, state_dir: Path) -> None:
    while True:
        time.sleep(1)
        cluster = SlurmCluster.load(state_dir)
        if cluster is None or not cluster.pids:
            return  # stopped by its owner (or its folder removed)
        if not _alive(owner, None):
            stop_shared(state_dir)
            shutil.rmtree(state_dir, ignore_errors=True)
            state_dir.with_name(state_dir.name + ".lock").unlink(missing_ok=True)
            return


def main(argv: list[str]) -> int:
    """``start DIR``: a cluster of one's own in DIR (docs/guide/slurm.md, "Try it on one machine"),
    its SLURM_CONF printed; ``stop DIR``: stopped (its jobs cancelled, its daemons ended)."""
    if argv[:1] == ["watch"] and len(argv) == 3:
        _watch(int(argv[1]), Path(argv[2]))
        return 0
    if argv[:1] == ["start"] and len(argv) == 2:
        cluster = SlurmCluster.create(Path(argv[1]).resolve())
        try:
            cluster.start()
        except (Unavailable, StartFailed) as exc:
            print(f"slurm_cluster: {exc}", file=sys.stderr)
            return 1
        print(f"one node ({cluster.node}, {cluster.cpus} CPUs, partition {cluster.partition}) is up; its "
              f"configuration: export SLURM_CONF={cluster.conf}")
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2:
        cluster = SlurmCluster.load(Path(argv[1]).resolve())
        if cluster is None:
            print(f"slurm_cluster: no cluster in {argv[1]}", file=sys.stderr)
            return 1
        cluster.stop()
        print(f"stopped the cluster in {argv[1]}")
        return 0
    print("usage: slurm_cluster.py start STATE_DIR | stop STATE_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
