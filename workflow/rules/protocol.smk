rule run_series:
    input:
        unpack(job_inputs),
    output:
        shots="results/shots/{job}.jsonl",
        telemetry="results/telemetry/{job}.jsonl",
        bench="results/bench/{job}.json",
    log:
        "logs/run_series/{job}.log",
    wildcard_constraints:
        job=JOB_PATTERN,
    # The run's order (measure.order): the sides of a cell alternate in time.
    priority: series_priority
    conda:
        ENV
    resources:
        measurement_slot=1,
        # Under Slurm: the node to itself, pinned to its placement group's node (placement.nodes).
        slurm_extra=measurement_slurm_extra,
    params:
        # The series' plan and nothing else: a change to it, and only that, re-measures the series.
        plan=job_plan,
    script:
        "../scripts/run_series.py"


rule probe_divergence:
    input:
        unpack(divergence_inputs),
    output:
        "results/divergence/{job}.json",
    log:
        "logs/probe_divergence/{job}.log",
    wildcard_constraints:
        job=JOB_PATTERN,
    conda:
        ENV
    resources:
        measurement_slot=1,
        slurm_extra=measurement_slurm_extra,
    params:
        plan=divergence_plan,
    script:
        "../scripts/probe_divergence.py"
