rule run_series:
    input:
        unpack(job_inputs),
    output:
        shots="results/shots/{job}.jsonl",
        telemetry="results/telemetry/{job}.jsonl",
    log:
        "logs/run_series/{job}.log",
    wildcard_constraints:
        job=JOB_PATTERN,
    conda:
        ENV
    resources:
        measurement_slot=1,
    params:
        job=job_spec,
        run_id=config["run_id"],
        engines=config["engines"],
        protocol=config["protocol"],
        workloads=config["workloads"],
        spec_modes=config["spec_modes"],
        server=config["server"],
        telemetry=config["telemetry"],
        log_dir=subpath(output.shots, strip_suffix=".jsonl"),
    script:
        "../scripts/run_series.py"


rule bench_engine:
    input:
        unpack(bench_inputs),
    output:
        "results/bench/{engine}/{model}.json",
    log:
        "logs/bench_engine/{engine}/{model}.log",
    wildcard_constraints:
        engine=ENGINE_PATTERN,
        model=MODEL_PATTERN,
    conda:
        ENV
    resources:
        measurement_slot=1,
    params:
        engine=engine_spec,
        lengths=config["prompts"]["lengths"],
        output_tokens=config["protocol"]["output_tokens"],
        repetitions=config["bench"]["repetitions"],
    script:
        "../scripts/bench_engine.py"
