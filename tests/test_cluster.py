"""Scheduler fields of a shot row, from the environment a Slurm job step sees."""

from whichshot.cluster import cluster_identity, slurm_gpus

STEP_ENV = {
    "SLURM_JOB_ID": "42",
    "SLURMD_NODENAME": "gpu-node-07",
    "SLURM_JOB_GPUS": "2,3",
    "SLURM_STEP_GPUS": "3",
    "CUDA_VISIBLE_DEVICES": "0",
}


def test_outside_slurm_every_field_is_null():
    fields = cluster_identity({"CUDA_VISIBLE_DEVICES": "0"})
    assert fields == {"slurm_job_id": None, "slurm_node": None, "slurm_gpus": None, "gpu_uuid": None}


def test_inside_a_job_step_the_step_gpus_win_over_the_jobs():
    fields = cluster_identity(STEP_ENV)
    assert (fields["slurm_job_id"], fields["slurm_node"], fields["slurm_gpus"]) == ("42", "gpu-node-07", "3")


def test_a_batch_script_without_a_step_reports_the_jobs_gpus():
    env = {k: v for k, v in STEP_ENV.items() if k != "SLURM_STEP_GPUS"}
    assert slurm_gpus(env) == "2,3"


def test_a_job_without_gpus_has_no_gpu_fields():
    fields = cluster_identity({"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cpu-1"})
    assert fields["slurm_gpus"] is None and fields["gpu_uuid"] is None
