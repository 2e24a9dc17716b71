"""A real multi-node Slurm on this machine, for tests and benchmarks: munge, slurmctld, N slurmd.

Debian's slurm-wlm lets several `slurmd` share one host when each has its own node name and port
(`slurmd -N n1`). Every path a daemon writes (state, spool, logs, pids, the munge socket and key) is
under one folder, so clusters started by different test runs never see each other, and nothing is left
behind when the folder goes. The GPUs are fake: character devices made with mknod, which is all
Slurm's gres plugin needs to hand out indices and set CUDA_VISIBLE_DEVICES.

    with slurm_cluster(tmp_path) as cluster:            # raises SlurmUnavailable when it cannot start
        cluster.run("sbatch", "--wrap", "true")
    with slurm_cluster(tmp_path, accounting=True) as cluster: ...   # + slurmdbd on the machine's MariaDB

Start-up takes one to a few seconds; stop cancels every job, sends SIGTERM to each daemon by its pid,
waits, and SIGKILLs what is left of this cluster (a stray `slurmstepd`, a job's process), found by a
marker in the process environment that only this cluster's processes carry.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Debian packages the cluster needs (`scripts/setup.sh --dev` installs them as root).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "slurmdbd", "slurm-wlm-mysql-plugin")
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
#: The NVIDIA driver's character-device major number; Slurm only checks that the files exist.
NVIDIA_MAJOR = 195
#: Environment variable set on every daemon (and so on every slurmstepd they fork): how stop() finds
#: leftover processes of this cluster and of no other.
MARKER_VARIABLE = "GPUCOMMONS_TEST_SLURM"
DEFAULT_MARIADB = ("127.0.0.1", 3306, "root")


class SlurmUnavailable(RuntimeError):
    """The cluster cannot start here; the message is one sentence saying why (tests skip with it)."""


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """How many nodes, what each has, and which partition and features they carry."""

    nodes: int = 4
    gpus_per_node: int = 8
    cpus_per_node: int = 8
    memory_mb_per_node: int = 4000
    partition: str = "gpu"
    #: Node name → its features (Slurm's `Features=`); nodes left out have none.
    features: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Seconds without an answer before slurmctld marks a slurmd DOWN (Slurm's default is 300).
    slurmd_timeout_s: int = 20
    #: Seconds between SIGTERM and SIGKILL when Slurm itself cancels a job (Slurm's default is 30).
    kill_wait_s: int = 2

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"n{i}" for i in range(1, self.nodes + 1))


@dataclass
class SlurmCluster:
    """A running cluster. `env` is what every client command needs (SLURM_CONF)."""

    root: Path
    name: str
    shape: ClusterShape
    accounting: bool
    enforce: bool = False
    #: Database slurmdbd keeps its tables in (None without accounting).
    database: str | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.shape.node_names

    @property
    def env(self) -> dict[str, str]:
        """The caller's environment plus SLURM_CONF (and no stray SLURM_* of an enclosing job)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**base, "SLURM_CONF": str(self.conf)}

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster; `check` raises with its stderr on failure."""
        done = subprocess.run(
            list(args), input=input, capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def job_ids(self) -> list[str]:
        out = self.run("squeue", "--noheader", "--format=%i", check=False).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def cancel_all(self, timeout: float = 15) -> None:
        """Cancel every job and wait until the queue is empty (completing jobs included)."""
        ids = self.job_ids()
        if ids:
            self.run("scancel", *ids, check=False)
        wait_until("the queue to drain", lambda: not self.job_ids(), timeout)

    def all_nodes_idle(self) -> bool:
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", check=False).stdout
        states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
        return set(self.node_names) <= states.keys() and all(states[n] == "idle" for n in self.node_names)

    def wait_nodes_idle(self, timeout: float = 30) -> None:
        """Wait until every node answers and is IDLE (after start, or after a node came back)."""
        wait_until("every node to be idle", self.all_nodes_idle, timeout)

    def kill_node(self, node: str) -> None:
        """SIGKILL one slurmd (a node that dies); its jobs' processes keep running, as on a real node."""
        process = self.processes.pop(f"slurmd-{node}")
        process.kill()
        process.wait()

    def start_node(self, node: str) -> None:
        """Start one slurmd again (ReturnToService=2: a DOWN node comes back when it registers)."""
        self.processes[f"slurmd-{node}"] = _spawn(
            self, f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)]
        )


def unavailable_reason() -> str | None:
    """Why no cluster can start on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (slurmd runs jobs as their users and mknod makes GPUs)"
    missing = [
        p for p in (*DAEMONS, *CLIENTS) if shutil.which(p) is None and not Path("/usr/sbin", p).exists()
    ]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): "
            f"apt-get install {' '.join(PACKAGES)} (scripts/setup.sh --dev does it as root)"
        )
    return None


def accounting_unavailable_reason(mariadb: tuple[str, int, str] = DEFAULT_MARIADB) -> str | None:
    """Why slurmdbd cannot run here (no slurmdbd, no MariaDB answering), or None."""
    if shutil.which("slurmdbd") is None and not Path("/usr/sbin/slurmdbd").exists():
        return "slurmdbd is not installed: apt-get install slurmdbd slurm-wlm-mysql-plugin"
    if shutil.which("mysql") is None:
        return "the mysql client is not installed (apt-get install mariadb-client)"
    host, port, user = mariadb
    try:
        _mysql(mariadb, "SELECT 1")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"no MariaDB answers as {user}@{host}:{port} without a password ({exc})"
    return None


@contextlib.contextmanager
def slurm_cluster(
    root: Path | None = None,
    shape: ClusterShape | None = None,
    *,
    accounting: bool = False,
    enforce: bool = False,
    mariadb: tuple[str, int, str] = DEFAULT_MARIADB,
    start_timeout: float = 60,
) -> Iterator[SlurmCluster]:
    """Start a cluster, yield it, stop it however the block ends.

    `root` None: a fresh folder in the system's temporary directory, removed after a clean stop (kept,
    and named in the error, when the start fails). A given `root` is kept. Every folder above it must
    be traversable by all users (jobs that run as another user read slurm.conf and reach the munge
    socket), which pytest's `tmp_path` is not: leave `root` None in tests.

    `accounting`: slurmdbd on the machine's MariaDB (a database of the cluster's own, dropped at stop).
    `enforce` (with accounting): `AccountingStorageEnforce=associations,limits,qos`, as a production
    cluster has it: a job needs a user association, and QOS limits hold.
    """
    reason = unavailable_reason() or (accounting_unavailable_reason(mariadb) if accounting else None)
    if reason:
        raise SlurmUnavailable(reason)
    own_root = root is None
    root = Path(tempfile.mkdtemp(prefix="gpucommons-slurm-")) if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    shape = shape or ClusterShape()
    cluster = SlurmCluster(
        root=root, name="t" + secrets.token_hex(4), shape=shape, accounting=accounting, enforce=enforce
    )
    try:
        _start(cluster, mariadb, start_timeout)
    except BaseException as exc:
        _stop(cluster, mariadb)
        if isinstance(exc, Exception) and not isinstance(exc, SlurmUnavailable):
            raise SlurmUnavailable(
                f"the Slurm test cluster did not start ({exc}); its logs are in {cluster.log_dir}"
            ) from exc
        raise
    try:
        yield cluster
    finally:
        _stop(cluster, mariadb)
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


def _daemons_alive(cluster: SlurmCluster, probe: Callable[[], bool]) -> Callable[[], bool]:
    """`probe`, which first raises if a daemon has died (a fatal configuration error ends it at once:
    say so instead of waiting out the timeout)."""

    def checked() -> bool:
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                log = cluster.log_dir / f"{name}.out"
                lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
                last = next((line for line in reversed(lines) if line.strip()), "no output")
                raise RuntimeError(f"{name} exited with status {process.returncode}: {last}")
        return probe()

    return checked


def wait_until(what: str, probe: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


# --- start ---------------------------------------------------------------------------------------


def _start(cluster: SlurmCluster, mariadb: tuple[str, int, str], timeout: float) -> None:
    root = cluster.root
    for sub in ("etc", "log", "run", "state", "spool", "dev", "munge"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    _make_gpu_devices(root / "dev", cluster.shape.gpus_per_node)
    ports = _free_ports(cluster.shape.nodes + 2)
    munge_socket = _start_munge(cluster)
    # Client commands (sacctmgr below) find slurmdbd through slurm.conf: write it first.
    _write_slurm_conf(cluster, munge_socket, ports)
    if cluster.accounting:
        cluster.database = f"slurm_acct_{cluster.name}"
        _write_slurmdbd_conf(cluster, munge_socket, mariadb, ports[1])
        cluster.processes["slurmdbd"] = _spawn(cluster, "slurmdbd", ["slurmdbd", "-D"])
        wait_until("slurmdbd to answer", _daemons_alive(cluster, lambda: _sacctmgr_answers(cluster)), timeout)
        # slurmctld registers with slurmdbd only as a cluster the database already knows.
        cluster.run("sacctmgr", "-i", "add", "cluster", cluster.name)
    (root / "etc" / "gres.conf").write_text(
        "AutoDetect=off\n"
        f"NodeName={_hostlist(cluster.node_names)} Name=gpu "
        f"File={root / 'dev'}/nvidia[0-{cluster.shape.gpus_per_node - 1}]\n"
    )
    (root / "etc" / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")
    cluster.processes["slurmctld"] = _spawn(
        cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(cluster.conf)]
    )
    wait_until("slurmctld to answer", _daemons_alive(cluster, lambda: _ping(cluster)), timeout)
    for node in cluster.node_names:
        cluster.start_node(node)
    wait_until("every node to be idle", _daemons_alive(cluster, cluster.all_nodes_idle), timeout)


def _make_gpu_devices(folder: Path, count: int) -> None:
    for index in range(count):
        path = folder / f"nvidia{index}"
        if path.exists():
            continue
        try:
            os.mknod(path, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, index))
        except OSError as exc:
            raise SlurmUnavailable(
                f"cannot make fake GPU devices with mknod in {folder} ({exc.strerror}); "
                "Slurm's gres plugin needs character devices"
            ) from None


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together so that none is handed out twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _start_munge(cluster: SlurmCluster) -> Path:
    folder = cluster.root / "munge"
    # munged refuses a socket folder others may write to; 711 lets every user reach the socket.
    folder.chmod(0o711)
    key = folder / "munge.key"
    if not key.exists():
        subprocess.run(
            ["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30
        )
    key.chmod(0o600)
    sock = folder / "munge.socket"
    cluster.processes["munged"] = _spawn(
        cluster,
        "munged",
        [
            "munged",
            "--foreground",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={cluster.root / 'run' / 'munged.pid'}",
            f"--log-file={cluster.log_dir / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        ],
    )
    wait_until("munged's socket", _daemons_alive(cluster, sock.exists), 15)
    return sock


def _spawn(cluster: SlurmCluster, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """A daemon in the foreground, in its own session, its output in log/NAME.out."""
    env = {**cluster.env, MARKER_VARIABLE: str(cluster.root)}
    with open(cluster.log_dir / f"{name}.out", "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _hostlist(names: Sequence[str]) -> str:
    return ",".join(names)


def _write_slurm_conf(cluster: SlurmCluster, munge_socket: Path, ports: Sequence[int]) -> None:
    root, shape = cluster.root, cluster.shape
    lines = [
        f"ClusterName={cluster.name}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={ports[0]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket},cred_expire=10",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}/%n",
        f"SlurmctldPidFile={root / 'run'}/slurmctld.pid",
        f"SlurmdPidFile={root / 'run'}/slurmd-%n.pid",
        f"SlurmctldLogFile={root / 'log'}/slurmctld.log",
        f"SlurmdLogFile={root / 'log'}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # Without a default, a job that does not ask for memory takes the whole node's and blocks it.
        "DefMemPerCPU=100",
        "GresTypes=gpu",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "SchedulerParameters=sched_min_interval=0,batch_sched_delay=0",
        f"SlurmdTimeout={shape.slurmd_timeout_s}",
        f"KillWait={shape.kill_wait_s}",
        "InactiveLimit=0",
        "MailProg=/bin/true",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
    ]
    if cluster.accounting:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=localhost",
            f"AccountingStoragePort={ports[1]}",
            f"AccountingStoragePass={munge_socket}",
            # GPUs as a TRES: AllocTRES counts gres/gpu, sacct reports them, a QOS can cap them
            # (slurmctld refuses this setting without slurmdbd).
            "AccountingStorageTRES=gres/gpu",
        ]
        if cluster.enforce:
            lines.append("AccountingStorageEnforce=associations,limits,qos")
    for node, port in zip(shape.node_names, ports[2:], strict=True):
        features = shape.features.get(node, ())
        lines.append(
            f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={shape.cpus_per_node} RealMemory={shape.memory_mb_per_node} "
            f"Gres=gpu:{shape.gpus_per_node}" + (f" Features={','.join(features)}" if features else "")
        )
    lines.append(
        f"PartitionName={shape.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    )
    cluster.conf.write_text("\n".join(lines) + "\n")


def _write_slurmdbd_conf(
    cluster: SlurmCluster, munge_socket: Path, mariadb: tuple[str, int, str], port: int
) -> None:
    host, db_port, user = mariadb
    conf = cluster.root / "etc" / "slurmdbd.conf"
    conf.write_text(
        "\n".join(
            [
                f"AuthInfo=socket={munge_socket},cred_expire=10",
                "AuthType=auth/munge",
                "DbdHost=localhost",
                f"DbdPort={port}",
                "SlurmUser=root",
                f"LogFile={cluster.log_dir / 'slurmdbd.log'}",
                f"PidFile={cluster.root / 'run' / 'slurmdbd.pid'}",
                "StorageType=accounting_storage/mysql",
                f"StorageHost={host}",
                f"StoragePort={db_port}",
                f"StorageUser={user}",
                f"StorageLoc={cluster.database}",
            ]
        )
        + "\n"
    )
    # slurmdbd refuses a configuration file that others may read (it may hold a password).
    conf.chmod(0o600)


def _sacctmgr_answers(cluster: SlurmCluster) -> bool:
    try:
        done = cluster.run("sacctmgr", "-n", "list", "cluster", check=False, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _ping(cluster: SlurmCluster) -> bool:
    done = cluster.run("scontrol", "ping", check=False, timeout=10)
    return done.returncode == 0 and "UP" in done.stdout


def _mysql(mariadb: tuple[str, int, str], statement: str) -> str:
    host, port, user = mariadb
    done = subprocess.run(
        ["mysql", "-h", host, "-P", str(port), "-u", user, "--batch", "-e", statement],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"mysql exited {done.returncode}")
    return done.stdout


# --- stop ----------------------------------------------------------------------------------------


def _stop(cluster: SlurmCluster, mariadb: tuple[str, int, str]) -> None:
    if "slurmctld" in cluster.processes:
        with contextlib.suppress(Exception):
            cluster.cancel_all(timeout=cluster.shape.kill_wait_s + 10)
    order = [n for n in cluster.processes if n.startswith("slurmd-")] + ["slurmctld", "slurmdbd", "munged"]
    for name in order:
        process = cluster.processes.get(name)
        if process is not None and process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + 10
    for name in order:
        process = cluster.processes.pop(name, None)
        if process is None:
            continue
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _kill_leftovers(cluster)
    if cluster.database:
        with contextlib.suppress(Exception):
            _mysql(mariadb, f"DROP DATABASE IF EXISTS `{cluster.database}`")


def _kill_leftovers(cluster: SlurmCluster) -> None:
    """SIGKILL every process that carries this cluster's marker or its SLURM_CONF (stepd, job tasks)."""
    markers = (
        f"{MARKER_VARIABLE}={cluster.root}".encode(),
        f"SLURM_CONF={cluster.conf}".encode(),
    )
    for pid in _processes_with(markers):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _processes_with(markers: Sequence[bytes]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(marker in environ for marker in markers):
            found.append(int(entry.name))
    return found
