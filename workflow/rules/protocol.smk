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
    conda:
        ENV
    resources:
        measurement_slot=1,
        # Under Slurm: the node to itself, pinned to its placement group's node (placement.nodes).
        slurm_extra=measurement_slurm_extra,
    params:
        job=job_spec,
        run_id=config["run_id"],
        engines=config["engines"],
        protocol=config["protocol"],
        workloads=config["workloads"],
        spec_modes=config["spec_modes"],
        server=config["server"],
        telemetry=config["telemetry"],
        bench=config["bench"],
        log_dir=subpath(output.shots, strip_suffix=".jsonl"),
    script:
        "../scripts/run_series.py"
