"""A private single-node Slurm on localhost (munged, slurmctld, slurmd) for the e2e tests.

Everything (keys, config, state, logs) lives in one scratch directory; the daemons run in the
foreground as children of this process and are stopped by their pids. Debian's packages:
`apt-get install slurmctld slurmd slurm-client munge`.
"""

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import yaml

PARTITION = "whichshot"
FAKE_GPUS = ("/dev/null", "/dev/zero")  # gres needs a device file per GPU; nothing opens them
MEASUREMENT_RULES = ("run_series",)
SLURM_PROFILE = Path(__file__).resolve().parent.parent / "workflow" / "profiles" / "slurm" / "config.yaml"
NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "srun")


def unavailable_reason() -> str | None:
    """Why a private Slurm cannot be started here, or None when it can."""
    missing = [name for name in NEEDED if shutil.which(name) is None]
    if missing:
        return f"Slurm/munge not installed (missing {', '.join(missing)}; see .ci/run)"
    if os.geteuid() != 0:
        return "starting slurmd and munged as their users needs root"
    return None


@dataclass
class SlurmCluster:
    root: Path
    node: str
    env: dict[str, str]
    daemons: list[subprocess.Popen] = field(default_factory=list)
    bring_up_s: float = 0.0

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
        there), state, start and end (whole seconds)."""
        argv = ["squeue", "--states=all", "--noheader", "--format=%i|%k|%T|%S|%e"]
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True).stdout
        keys = ("job_id", "comment", "state", "start", "end")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines() if line]

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


def _node_line(node: str) -> str:
    """This machine's hardware as slurmd sees it (`slurmd -C`), minus the name and uptime."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    hardware = out.splitlines()[0].split(" ", 1)[1]
    return f"NodeName={node} NodeAddr=127.0.0.1 {hardware} Gres=gpu:{len(FAKE_GPUS)} State=UNKNOWN"


def slurm_conf(root: Path, node: str) -> str:
    """slurm.conf for one node that is both controller and compute node; no accounting DB."""
    return "\n".join([
        "ClusterName=whichshot",
        f"SlurmctldHost={node}(127.0.0.1)",
        "SlurmUser=root",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
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
        "GresTypes=gpu",
        _node_line(node),
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])  # fmt: skip


def _write_configs(root: Path, node: str) -> Path:
    for sub in ("state", "spool", "run", "log", "etc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    conf = root / "etc" / "slurm.conf"
    conf.write_text(slurm_conf(root, node))
    gres = "".join(f"NodeName={node} Name=gpu File={path}\n" for path in FAKE_GPUS)
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


def _node_idle(cluster: SlurmCluster) -> bool:
    argv = ["sinfo", "--noheader", "--Node", "--format=%T", f"--nodes={cluster.node}"]
    out = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, check=False)
    return out.returncode == 0 and out.stdout.strip() == "idle"


def start_cluster() -> SlurmCluster:
    """Start munged, slurmctld and slurmd; return once the node is idle (stop() on failure)."""
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="whichshot-slurm-"))
    root.chmod(0o755)  # the munge user must reach its socket directory
    node = socket.gethostname().split(".")[0]
    munge_dir = _prepare_munge(root)
    conf = _write_configs(root, node)
    path = f"{_srun_shim(root, conf)}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": path}
    cluster = SlurmCluster(root=root, node=node, env=env)
    try:
        cluster.daemons.append(_munged(munge_dir, root / "log" / "munged.log"))
        _wait_for((munge_dir / "munge.socket").exists, "munged's socket", cluster)
        for daemon in (["slurmctld", "-D", "-i"], ["slurmd", "-D", "-N", node]):
            cluster.daemons.append(subprocess.Popen(
                [*daemon, "-f", str(conf)], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        _wait_for(lambda: _node_idle(cluster), f"node {node} to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    cluster.bring_up_s = time.monotonic() - t0
    return cluster


def local_profile(dest: Path) -> Path:
    """The shipped Slurm profile with its placeholders filled for the local 2-CPU node.

    Measurement jobs ask for one CPU and one (fake) GPU each, so the node could run two at once:
    only the measurement_slot keeps them apart, which is what the overlap test checks.
    """
    profile = yaml.safe_load(SLURM_PROFILE.read_text())
    assert profile["resources"]["measurement_slot"] == 1
    profile.update({
        "jobs": 4, "cores": 2, "latency-wait": 5,
        "slurm-init-seconds-before-status-checks": 2, "set-threads": {"build_engine": 2},
    })  # fmt: skip
    defaults = profile["default-resources"]
    del defaults["slurm_account"]
    defaults.update(slurm_partition=PARTITION, mem_mb=1000, runtime=30)
    for rule, resources in profile["set-resources"].items():
        resources.update(cpus_per_task=1 if rule in MEASUREMENT_RULES else 2, mem_mb=2000, runtime=30)
        if rule in MEASUREMENT_RULES:
            assert resources["measurement_slot"] == 1 and resources["gpu"] <= len(FAKE_GPUS)
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
    # Manual check: bring the cluster up, run one job, report timings, stop it.
    up = start_cluster()
    try:
        print(f"bring-up {up.bring_up_s:.2f} s in {up.root}")
        t = time.monotonic()
        job = ["srun", "--gpus=1", "bash", "-c", "echo $SLURM_JOB_ID $SLURMD_NODENAME $SLURM_JOB_GPUS"]
        out = subprocess.run(job, env=up.env, capture_output=True, text=True, timeout=60)
        print(out.stdout.strip(), out.stderr.strip(), f"({time.monotonic() - t:.2f} s)")
    finally:
        up.stop()
