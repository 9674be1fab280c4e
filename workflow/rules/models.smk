rule model_traffic:
    input:
        "results/models/{model}.json",
    output:
        "results/traffic/{model}.json",
    log:
        "logs/model_traffic/{model}.log",
    benchmark:
        "results/benchmarks/model_traffic/{model}.tsv"
    wildcard_constraints:
        model=MODEL_PATTERN,
    conda:
        ENV
    params:
        cache_dir=config["cache_dir"],
    script:
        "../scripts/model_traffic.py"


rule probe_hardware:
    input:
        unpack(probe_inputs),
    output:
        "results/hardware/{probe}.json",
    log:
        "logs/probe_hardware/{probe}.log",
    benchmark:
        "results/benchmarks/probe_hardware/{probe}.tsv"
    wildcard_constraints:
        probe=PROBE_PATTERN,
    conda:
        ENV
    resources:
        # It loads the memory and every core, and runs the engines' llama-bench: never beside a
        # measurement on the same machine.
        measurement_slot=1,
        slurm_extra=probe_slurm_extra,
    params:
        node=probed_node,
        copy_threads=probe_copy_threads(),
        kernels=KERNEL_PROBE_MODELS,
        engines=probe_engine_settings(),
        cache_dir=config["cache_dir"],
        bracket=KERNELS_BEFORE,
    script:
        "../scripts/probe_hardware.py"


# The engines' kernels again once every series has run (the shots table is written after the
# last one): a shared machine's speed drifts, and the ceiling takes the faster pass.
rule probe_kernels_after:
    input:
        unpack(probe_inputs),
        # After every series (their own files: a new run_id re-stamps shots.parquet, not these).
        shots=shots_of_all_jobs,
    output:
        "results/hardware/after/{probe}.json",
    log:
        "logs/probe_kernels_after/{probe}.log",
    benchmark:
        "results/benchmarks/probe_kernels_after/{probe}.tsv"
    wildcard_constraints:
        probe=PROBE_PATTERN,
    conda:
        ENV
    resources:
        measurement_slot=1,
        slurm_extra=probe_slurm_extra,
    params:
        node=probed_node,
        copy_threads=probe_copy_threads(),
        kernels=KERNEL_PROBE_MODELS,
        engines=probe_engine_settings(),
        cache_dir=config["cache_dir"],
        bracket=KERNELS_AFTER,
    script:
        "../scripts/probe_hardware.py"


rule fetch_model:
    input:
        unpack(synthetic_donor),
    output:
        "results/models/{model}.json",
    log:
        "logs/fetch_model/{model}.log",
    benchmark:
        "results/benchmarks/fetch_model/{model}.tsv"
    wildcard_constraints:
        model=MODEL_PATTERN,
    conda:
        ENV
    resources:
        # Writing a synthetic model or hashing a large file loads the disk and a core for seconds
        # to minutes: never beside a measurement on the same machine.
        measurement_slot=1,
    params:
        spec=model_pin,
        cache_dir=config["cache_dir"],
    script:
        "../scripts/fetch_model.py"
