"""A private Slurm on localhost (munged, slurmctld, one slurmd per node) for the e2e tests.

Everything (keys, config, state, logs) lives in one scratch directory; the daemons run in the
foreground as children of this process and are stopped by their pids. Debian's packages:
tests/system_packages.py's SLURM.

One node is this machine under its own name. Several nodes (`start_cluster(nodes=3)`) are simulated
on this one machine: one slurmd per node (`-N name`), each on its own port with its own spool, pid
and log files, which is all Slurm needs. Each also runs in a UTS namespace of its own whose hostname
is the node's name, so that its jobs see themselves on that host (`hostname`, socket.gethostname(),
which whichshot records per shot) as they would on a real cluster, not all on this machine's name.
"""

import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import yaml

from tests.system_packages import SLURM

PARTITION = "whichshot"
FAKE_GPUS = ("/dev/null", "/dev/zero")  # gres needs a device file per GPU; nothing opens them
NODE_PREFIX = "wsn"  # simulated nodes are wsn1, wsn2, ...
SIMULATED_NODE_CPUS = 2  # room for two 1-CPU jobs on each simulated node, on any machine
# Node features, given round robin: --constraint=kind_b picks wsn2 alone of three nodes, kind_a two.
NODE_FEATURES = ("kind_a", "kind_b")
CLONE_NEWUTS = 0x04000000  # <sched.h>; os.unshare arrives only in Python 3.12
MEASUREMENT_RULES = ("run_series",)
SLURM_PROFILE = Path(__file__).resolve().parent.parent / "workflow" / "profiles" / "slurm" / "config.yaml"


def unavailable_reason(nodes: int = 1) -> str | None:
    """Why a private Slurm of this many nodes cannot be started here, or None when it can."""
    missing = SLURM.skip_reason()
    if missing:
        return f"Slurm/munge: {missing}"
    if os.geteuid() != 0:
        return "starting slurmd and munged as their users needs root"
    if nodes > 1 and not _can_own_hostname():
        return "several nodes need a UTS namespace each, and `unshare --uts` fails here"
    return None


def _can_own_hostname() -> bool:
    """Whether this process may make UTS namespaces (a container without CAP_SYS_ADMIN may not)."""
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--uts", "true"], capture_output=True, check=False).returncode == 0


@dataclass
class SlurmCluster:
    root: Path
    nodes: list[str]
    env: dict[str, str]
    daemons: list[subprocess.Popen] = field(default_factory=list)
    bring_up_s: float = 0.0

    @property
    def node(self) -> str:
        """The first node: the only one of a single-node cluster."""
        return self.nodes[0]

    def stop(self) -> None:
        """Cancel leftover jobs of this cluster, then stop each daemon by its pid, newest first."""
        if self.daemons and self.daemons[-1].poll() is None:
            subprocess.run(["scancel", "--partition", PARTITION], env=self.env, timeout=30, check=False)
        for daemon in reversed(self.daemons):
            _stop_daemon(daemon)
        self.daemons.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def jobs(self) -> list[dict[str, str]]:
        """Every job this cluster still remembers: id, comment (the executor writes the rule
        there), state, start and end (whole seconds), job name, the nodes it ran on and the CPUs
        it was given (a whole node's for --exclusive)."""
        argv = ["squeue", "--states=all", "--noheader", "--format=%i|%k|%T|%S|%e|%j|%N|%C"]
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True).stdout
        keys = ("job_id", "comment", "state", "start", "end", "name", "nodes", "cpus")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines() if line]

    def wait_for_jobs(self, timeout_s: float = 120) -> None:
        """Return once no job is pending, running or completing."""
        argv = ["squeue", "--noheader", "--format=%i", "--states=PENDING,CONFIGURING,RUNNING,COMPLETING"]
        deadline = time.monotonic() + timeout_s
        while subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True).stdout.strip():
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still queued after {timeout_s:.0f} s\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        """The tail of every daemon log, for a failure message."""
        tails = []
        for log in sorted(self.root.glob("log/*.log")):
            tails.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(tails)


def _stop_daemon(daemon: subprocess.Popen) -> None:
    if daemon.poll() is not None:
        return
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=15)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait(timeout=15)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _hardware(simulated: bool) -> str:
    """This machine's hardware as slurmd sees it (`slurmd -C`), minus the name and uptime. A
    simulated node has SIMULATED_NODE_CPUS cores instead, whatever this machine has, so that the
    tests' job counts fit the same way everywhere; it claims this machine's memory."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    hardware = out.splitlines()[0].split(" ", 1)[1]
    if not simulated:
        return hardware
    memory = next(item for item in hardware.split() if item.startswith("RealMemory="))
    cpus = SIMULATED_NODE_CPUS
    return f"CPUs={cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={cpus} ThreadsPerCore=1 {memory}"


def _node_line(node: str, index: int, hardware: str) -> str:
    """A NodeName line: simulated nodes all claim this machine's memory and may claim more cores
    than it has (they oversubscribe it); each has both fake GPUs, its own slurmd port and one
    feature of NODE_FEATURES."""
    feature = NODE_FEATURES[index % len(NODE_FEATURES)]
    return (f"NodeName={node} NodeAddr=127.0.0.1 Port={_free_port()} {hardware} "
            f"Gres=gpu:{len(FAKE_GPUS)} Features={feature} State=UNKNOWN")  # fmt: skip


def node_names(nodes: int) -> list[str]:
    """One node is this machine under its own name; several are wsn1, wsn2, ..."""
    if nodes == 1:
        return [socket.gethostname().split(".")[0]]
    return [f"{NODE_PREFIX}{i}" for i in range(1, nodes + 1)]


def slurm_conf(root: Path, nodes: list[str]) -> str:
    """slurm.conf for a controller on this machine and the given compute nodes; no accounting DB.
    %n (the node's name) keeps each slurmd's spool, pid and log apart."""
    simulated = len(nodes) > 1
    hardware = _hardware(simulated)
    return "\n".join([
        "ClusterName=whichshot",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
        "SlurmUser=root",
        f"SlurmctldPort={_free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool' / '%n'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        # Finished jobs stay visible to squeue this long: the executor's squeue status check needs
        # >= 300 s; two hours keep every job of a test run, or of the default grid, there to be read back.
        "MinJobAge=7200",
        # Simulated nodes are what slurm.conf says, not what slurmd finds on this machine.
        *(["SlurmdParameters=config_overrides"] if simulated else []),
        "GresTypes=gpu",
        *(_node_line(node, index, hardware) for index, node in enumerate(nodes)),
        f"PartitionName={PARTITION} Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])  # fmt: skip


def _write_configs(root: Path, nodes: list[str]) -> Path:
    for sub in ("state", "run", "log", "etc", *(f"spool/{node}" for node in nodes)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    conf = root / "etc" / "slurm.conf"
    conf.write_text(slurm_conf(root, nodes))
    gres = "".join(f"NodeName={node} Name=gpu File={path}\n" for node in nodes for path in FAKE_GPUS)
    (root / "etc" / "gres.conf").write_text(gres)
    return conf


def _srun_shim(root: Path, conf: Path) -> Path:
    """A bin/ directory whose srun restores SLURM_CONF before running the real srun.

    snakemake-executor-plugin-slurm-jobstep 0.6.1 strips every SLURM_* variable but the job's
    identity before its inner srun, SLURM_CONF included; a site whose slurm.conf is not at the
    compiled-in path (like this private cluster) needs the path back.
    """
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "srun"
    real = shutil.which("srun")
    shim.write_text(f'#!/bin/sh\nSLURM_CONF={shlex.quote(str(conf))} exec {shlex.quote(real)} "$@"\n')
    shim.chmod(0o755)
    return bin_dir


def _prepare_munge(root: Path) -> Path:
    """A fresh key and socket directory owned by the munge user (munged checks both)."""
    munge_dir = root / "munge"
    munge_dir.mkdir()
    munge_dir.chmod(0o755)  # munged: clients need execute permission on the socket directory
    key = munge_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    for path in (munge_dir, key):
        shutil.chown(path, user="munge", group="munge")
    return munge_dir


def _munged(munge_dir: Path, log: Path) -> subprocess.Popen:
    log.touch()
    shutil.chown(log, user="munge", group="munge")
    argv = [
        "munged", "--foreground", f"--socket={munge_dir / 'munge.socket'}",
        f"--key-file={munge_dir / 'munge.key'}", f"--pid-file={munge_dir / 'munged.pid'}",
        f"--seed-file={munge_dir / 'munged.seed'}", f"--log-file={log}",
    ]  # fmt: skip
    return subprocess.Popen(argv, user="munge", group="munge", stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip


def _wait_for(check, what: str, cluster: SlurmCluster, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dead = [d.args[0] for d in cluster.daemons if d.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}\n{cluster.logs()}")
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{cluster.logs()}")


def _nodes_idle(cluster: SlurmCluster) -> bool:
    argv = ["sinfo", "--noheader", "--Node", "--format=%T", f"--nodes={','.join(cluster.nodes)}"]
    out = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, check=False)
    return out.returncode == 0 and out.stdout.split() == ["idle"] * len(cluster.nodes)


def _own_hostname(node: str) -> None:
    """In the child before exec: a UTS namespace of its own whose hostname is the node's name, so
    the node's jobs see `hostname`, socket.gethostname() and $SLURMD_NODENAME agree."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWUTS) for {node}")
    socket.sethostname(node)


def _slurmd(node: str, conf: Path, env: dict[str, str], own_hostname: bool) -> subprocess.Popen:
    """slurmd for one node in the foreground; with own_hostname, in a UTS namespace named after it."""
    return subprocess.Popen(
        ["slurmd", "-D", "-N", node, "-f", str(conf)], env=env,
        preexec_fn=(lambda: _own_hostname(node)) if own_hostname else None,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip


def start_cluster(nodes: int = 1) -> SlurmCluster:
    """Start munged, slurmctld and one slurmd per node; return once every node is idle (stop() on
    failure). One node is this machine under its own name; more are wsn1..wsnN, each in its own
    UTS namespace, each of SIMULATED_NODE_CPUS cores, all sharing this machine's (see _hardware)."""
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="whichshot-slurm-"))
    root.chmod(0o755)  # the munge user must reach its socket directory
    names = node_names(nodes)
    munge_dir = _prepare_munge(root)
    conf = _write_configs(root, names)
    path = f"{_srun_shim(root, conf)}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": path}
    cluster = SlurmCluster(root=root, nodes=names, env=env)
    try:
        cluster.daemons.append(_munged(munge_dir, root / "log" / "munged.log"))
        _wait_for((munge_dir / "munge.socket").exists, "munged's socket", cluster)
        cluster.daemons.append(subprocess.Popen(
            ["slurmctld", "-D", "-i", "-f", str(conf)], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        for node in names:
            cluster.daemons.append(_slurmd(node, conf, env, own_hostname=nodes > 1))
        _wait_for(lambda: _nodes_idle(cluster), f"nodes {','.join(names)} to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    cluster.bring_up_s = time.monotonic() - t0
    return cluster


def local_profile(dest: Path, nodes: int = 1, first_check_s: int = 2) -> Path:
    """The shipped Slurm profile with its placeholders filled for the local cluster of `nodes`
    nodes of 2 CPUs each.

    Measurement jobs ask for one CPU and one (fake) GPU each, so a node could run two at once: only
    their --exclusive (the rule's slurm_extra) keeps them apart, which is what the overlap tests
    check. `first_check_s`: seconds from a submission to the executor's first status check (each
    later check waits 10 s longer), so a job that ends within 2 x first_check_s + 10 s costs that long.
    """
    profile = yaml.safe_load(SLURM_PROFILE.read_text())
    assert "measurement_slot" not in profile.get("resources", {}), "the cluster profile has no global slot"
    profile.update({
        "jobs": 2 * nodes + 2, "cores": 2 * nodes, "latency-wait": 5,
        "slurm-init-seconds-before-status-checks": first_check_s, "set-threads": {"build_engine": 2},
    })  # fmt: skip
    defaults = profile["default-resources"]
    del defaults["slurm_account"]
    defaults.update(slurm_partition=PARTITION, mem_mb=1000, runtime=30)
    for rule, resources in profile["set-resources"].items():
        resources.update(cpus_per_task=1 if rule in MEASUREMENT_RULES else 2, mem_mb=2000, runtime=30)
        if rule in MEASUREMENT_RULES:
            assert "slurm_extra" not in resources and resources["gpu"] <= len(FAKE_GPUS)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile))
    return dest


def measurement_jobs(jobs: list[dict[str, str]]) -> list[dict[str, str]]:
    """The jobs (as SlurmCluster.jobs lists them) that ran a measurement rule."""
    rules = tuple(f"rule_{rule}" for rule in MEASUREMENT_RULES)
    return [job for job in jobs if job["comment"].startswith(rules)]


def overlapping_jobs(jobs: list[dict[str, str]]) -> list[tuple[str, str]]:
    """Pairs of consecutive jobs (by start) whose Slurm start/end times overlap. Slurm keeps whole
    seconds, so a job may start in the second the previous one ended without overlapping it."""
    when = datetime.fromisoformat
    spans = sorted((when(job["start"]), when(job["end"]), job["job_id"]) for job in jobs)
    return [(a[2], b[2]) for a, b in zip(spans, spans[1:], strict=False) if a[1] > b[0]]


def most_at_once(jobs: list[dict[str, str]]) -> int:
    """The most jobs running in one instant by Slurm's start/end records. A job that starts in the
    second another ended is not counted with it (Slurm keeps whole seconds)."""
    when = datetime.fromisoformat
    ends_first = sorted([(when(job["end"]), -1) for job in jobs] + [(when(job["start"]), 1) for job in jobs])
    running = most = 0
    for _, change in ends_first:
        running += change
        most = max(most, running)
    return most


def jobs_on(jobs: list[dict[str, str]], node: str) -> list[dict[str, str]]:
    """The jobs (as SlurmCluster.jobs lists them) that ran on this node alone."""
    return [job for job in jobs if job["nodes"] == node]


def shot_windows(shots: pd.DataFrame) -> pd.DataFrame:
    """Per Slurm job: engine spawn of its first process to the end of its last shot (monotonic)."""
    spawn = shots["t_request_mono_s"] - shots["process_age_s"]
    frame = shots.assign(spawn=spawn).groupby("slurm_job_id")
    windows = pd.DataFrame({"start": frame["spawn"].min(), "end": frame["t_end_mono_s"].max()})
    return windows.sort_values("start")


def window_gaps(windows: pd.DataFrame) -> list[float]:
    """Seconds from the end of each shot window to the start of the next (negative = overlap)."""
    return list(windows["start"].iloc[1:].to_numpy() - windows["end"].iloc[:-1].to_numpy())


def overlapping_windows(windows: pd.DataFrame) -> list[tuple[str, str]]:
    """Pairs of consecutive Slurm jobs (by start) whose measured shot windows overlap."""
    ids = list(windows.index)
    return [(ids[i], ids[i + 1]) for i, gap in enumerate(window_gaps(windows)) if gap <= 0]


if __name__ == "__main__":
    # Manual check: bring the cluster up (`python -m tests.slurm_cluster [NODES]`), run one task per
    # node, report timings, stop it.
    up = start_cluster(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    try:
        print(f"bring-up of {','.join(up.nodes)}: {up.bring_up_s:.2f} s in {up.root}")
        t = time.monotonic()
        job = ["srun", f"--nodes={len(up.nodes)}", "--ntasks-per-node=1", "--gpus-per-node=1", "--mem=100",
               "bash", "-c", "echo $SLURM_JOB_ID $SLURMD_NODENAME $(hostname) $SLURM_STEP_GPUS"]  # fmt: skip
        out = subprocess.run(job, env=up.env, capture_output=True, text=True, timeout=60)
        print(out.stdout.strip(), out.stderr.strip(), f"({time.monotonic() - t:.2f} s)")
    finally:
        up.stop()
