"""Scheduler fields of a shot row, from the environment a Slurm job step sees, and the identity
of the GPUs the job uses (NVML is a stand-in here: no GPU on this machine)."""

from types import SimpleNamespace

import pynvml
import pytest

from whichshot.cluster import NO_GPU_IDENTITY, cluster_identity, slurm_gpus

STEP_ENV = {
    "SLURM_JOB_ID": "42",
    "SLURMD_NODENAME": "gpu-node-07",
    "SLURM_JOB_GPUS": "2,3",
    "SLURM_STEP_GPUS": "3",
    "CUDA_VISIBLE_DEVICES": "0",
}


def test_outside_slurm_every_slurm_field_is_null(monkeypatch):
    FakeNvml().install(monkeypatch, fail_init=True)
    fields = cluster_identity({"CUDA_VISIBLE_DEVICES": "0"})
    slurm = {k: fields[k] for k in ("slurm_job_id", "slurm_node", "slurm_gpus")}
    assert slurm == {"slurm_job_id": None, "slurm_node": None, "slurm_gpus": None}
    assert set(NO_GPU_IDENTITY) <= set(fields)


def test_inside_a_job_step_the_step_gpus_win_over_the_jobs():
    fields = cluster_identity(STEP_ENV)
    assert (fields["slurm_job_id"], fields["slurm_node"], fields["slurm_gpus"]) == ("42", "gpu-node-07", "3")


def test_a_batch_script_without_a_step_reports_the_jobs_gpus():
    env = {k: v for k, v in STEP_ENV.items() if k != "SLURM_STEP_GPUS"}
    assert slurm_gpus(env) == "2,3"


def test_a_job_without_gpus_has_no_gpu_fields(monkeypatch):
    FakeNvml(withheld={0, 1, 2}).install(monkeypatch)  # its cgroup grants no GPU
    fields = cluster_identity({"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cpu-1"})
    assert fields["slurm_gpus"] is None and fields["gpu_uuid"] is None
    assert {k: fields[k] for k in NO_GPU_IDENTITY} == NO_GPU_IDENTITY


class FakeNvml:
    """Three GPUs of one node as NVML describes them. NVML's order is not their PCI bus order
    (b, a, c: CUDA's order) nor their device minor number order (Slurm's)."""

    GPUS = [
        {"uuid": "GPU-a", "bus": "00000000:19:00.0", "minor": 1, "limit_mw": 700000, "max_sm": 1980},
        {"uuid": "GPU-b", "bus": "00000000:04:00.0", "minor": 0, "limit_mw": 500000, "max_sm": 1785},
        {"uuid": "GPU-c", "bus": "00000000:3B:00.0", "minor": 2, "limit_mw": 600000, "max_sm": 1900},
    ]

    def __init__(self, withheld: set[int] = frozenset(), unreadable: set[tuple[str, str]] = frozenset()):
        self.withheld = withheld  # NVML indices a cgroup keeps from this process
        self.unreadable = unreadable  # (uuid, key) NVML answers with NOT_SUPPORTED

    def _handle(self, index: int) -> dict:
        if index in self.withheld:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        return self.GPUS[index]

    def _read(self, key: str):
        def read(handle, *_args):
            if (handle["uuid"], key) in self.unreadable:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return handle[key]

        return read

    def install(self, monkeypatch, fail_init: bool = False) -> None:
        def init():
            if fail_init:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

        calls = {
            "nvmlInit": init,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.GPUS),
            "nvmlDeviceGetHandleByIndex": self._handle,
            "nvmlDeviceGetUUID": lambda h: h["uuid"],
            "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=h["bus"].encode()),
            "nvmlDeviceGetMinorNumber": lambda h: h["minor"],
            "nvmlDeviceGetEnforcedPowerLimit": self._read("limit_mw"),
            "nvmlDeviceGetMaxClockInfo": self._read("max_sm"),
            "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        }
        for name, call in calls.items():
            monkeypatch.setattr(pynvml, name, call)


def _gpu_fields(fields: dict) -> tuple:
    return fields["gpu_uuid"], fields["gpu_power_limit_w"], fields["gpu_max_sm_clock_mhz"]


def test_a_step_describes_only_its_gpus(monkeypatch):
    FakeNvml().install(monkeypatch)
    fields = cluster_identity(STEP_ENV | {"SLURM_STEP_GPUS": "0"})  # minor 0: GPU-b
    gpu = {k: fields[k] for k in NO_GPU_IDENTITY}
    assert gpu == {"gpu_uuid": "GPU-b", "gpu_name": "NVIDIA H200", "gpu_driver": "580.95.05",
                   "gpu_power_limit_w": 500.0, "gpu_max_sm_clock_mhz": 1785.0}  # fmt: skip


def test_in_a_slurm_cgroup_the_gpus_it_withholds_are_skipped_not_fatal(monkeypatch):
    FakeNvml(withheld={1, 2}).install(monkeypatch)  # only GPU-a (minor 1) granted
    fields = cluster_identity(STEP_ENV | {"SLURM_STEP_GPUS": "1"})
    assert _gpu_fields(fields) == ("GPU-a", 700.0, 1980.0)


def test_slurm_gpus_nvml_cannot_all_find_give_no_identity_never_the_hosts(monkeypatch):
    FakeNvml().install(monkeypatch)
    fields = cluster_identity(STEP_ENV | {"SLURM_STEP_GPUS": "1,5"})  # no GPU has minor number 5
    assert {k: fields[k] for k in NO_GPU_IDENTITY} == NO_GPU_IDENTITY


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("1", ("GPU-a", 700.0, 1980.0)),  # CUDA's device 1: second in PCI order, NVML's 0
        ("GPU-c", ("GPU-c", 600.0, 1900.0)),
        ("0,2", ("GPU-b,GPU-c", 1100.0, 1785.0)),  # both used: their limits summed
        ("", (None, None, None)),  # an empty list leaves CUDA no device
        ("MIG-4f2e1a", (None, None, None)),  # a MIG slice is not its whole GPU
    ],
)
def test_outside_slurm_the_gpus_cuda_visible_devices_names_are_described(monkeypatch, visible, expected):
    FakeNvml().install(monkeypatch)
    assert _gpu_fields(cluster_identity({"CUDA_VISIBLE_DEVICES": visible})) == expected


def test_with_cuda_visible_devices_unset_the_gpus_taken_are_named(monkeypatch):
    FakeNvml(withheld={0}).install(monkeypatch)
    assert _gpu_fields(cluster_identity({})) == ("GPU-b,GPU-c", 1100.0, 1785.0)


def test_a_field_nvml_cannot_read_for_one_gpu_is_null_alone(monkeypatch):
    FakeNvml(unreadable={("GPU-a", "limit_mw")}).install(monkeypatch)
    fields = cluster_identity({"CUDA_VISIBLE_DEVICES": "0,1"})
    assert _gpu_fields(fields) == ("GPU-b,GPU-a", None, 1785.0) and fields["gpu_name"] == "NVIDIA H200"


def test_without_nvml_the_identity_is_not_measured(monkeypatch):
    FakeNvml().install(monkeypatch, fail_init=True)
    fields = cluster_identity(STEP_ENV)
    assert {k: fields[k] for k in NO_GPU_IDENTITY} == {**NO_GPU_IDENTITY, "gpu_uuid": None}
