"""Scheduler fields of a shot row, from the environment a Slurm job step sees."""

import pynvml
import pytest

from whichshot.cluster import NO_GPU_IDENTITY, cluster_identity, gpu_identity, slurm_gpus

STEP_ENV = {
    "SLURM_JOB_ID": "42",
    "SLURMD_NODENAME": "gpu-node-07",
    "SLURM_JOB_GPUS": "2,3",
    "SLURM_STEP_GPUS": "3",
    "CUDA_VISIBLE_DEVICES": "0",
}


def test_outside_slurm_every_field_is_null():
    fields = cluster_identity({"CUDA_VISIBLE_DEVICES": "0"})
    slurm = {k: fields[k] for k in ("slurm_job_id", "slurm_node", "slurm_gpus", "gpu_uuid")}
    assert slurm == {"slurm_job_id": None, "slurm_node": None, "slurm_gpus": None, "gpu_uuid": None}
    assert set(NO_GPU_IDENTITY) <= set(fields)


def test_inside_a_job_step_the_step_gpus_win_over_the_jobs():
    fields = cluster_identity(STEP_ENV)
    assert (fields["slurm_job_id"], fields["slurm_node"], fields["slurm_gpus"]) == ("42", "gpu-node-07", "3")


def test_a_batch_script_without_a_step_reports_the_jobs_gpus():
    env = {k: v for k, v in STEP_ENV.items() if k != "SLURM_STEP_GPUS"}
    assert slurm_gpus(env) == "2,3"


def test_a_job_without_gpus_has_no_gpu_fields():
    fields = cluster_identity({"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cpu-1"})
    assert fields["slurm_gpus"] is None and fields["gpu_uuid"] is None


class FakeNvml:
    """Two GPUs of one node as NVML describes them: an H200 at 700 W and one capped at 500 W."""

    GPUS = [
        {"uuid": "GPU-a", "name": "NVIDIA H200", "limit_mw": 700000, "max_sm": 1980},
        {"uuid": "GPU-b", "name": "NVIDIA H200", "limit_mw": 500000, "max_sm": 1785},
    ]

    def install(self, monkeypatch, fail_init: bool = False) -> None:
        def init():
            if fail_init:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

        calls = {
            "nvmlInit": init,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.GPUS),
            "nvmlDeviceGetHandleByIndex": lambda i: self.GPUS[i],
            "nvmlDeviceGetUUID": lambda h: h["uuid"],
            "nvmlDeviceGetName": lambda h: h["name"],
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: h["limit_mw"],
            "nvmlDeviceGetMaxClockInfo": lambda h, _clock: h["max_sm"],
            "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        }
        for name, call in calls.items():
            monkeypatch.setattr(pynvml, name, call)


def test_gpu_identity_describes_only_the_jobs_gpus(monkeypatch):
    FakeNvml().install(monkeypatch)
    one = gpu_identity(["GPU-b"])
    assert one == {"gpu_name": "NVIDIA H200", "gpu_driver": "580.95.05", "gpu_power_limit_w": 500.0,
                   "gpu_max_sm_clock_mhz": 1785.0}  # fmt: skip
    both = gpu_identity(None)
    assert both["gpu_power_limit_w"] == 1200.0 and both["gpu_max_sm_clock_mhz"] == 1785.0


@pytest.mark.parametrize("fail_init, uuids", [(True, None), (False, ["GPU-not-here"])])
def test_without_nvml_or_without_the_gpu_the_identity_is_not_measured(monkeypatch, fail_init, uuids):
    FakeNvml().install(monkeypatch, fail_init=fail_init)
    assert gpu_identity(uuids) == NO_GPU_IDENTITY
