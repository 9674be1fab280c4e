rule build_prompts:
    input:
        build="results/engines/{engine}/build.json",
        model="results/models/{model}.json",
    output:
        "results/prompts/{engine}/{model}.json",
    log:
        "logs/build_prompts/{engine}/{model}.log",
    benchmark:
        "results/benchmarks/build_prompts/{engine}/{model}.tsv"
    wildcard_constraints:
        engine=ENGINE_PATTERN,
        model=MODEL_PATTERN,
    conda:
        ENV
    resources:
        # It starts the engine to tokenize: never beside a measurement on the same machine.
        measurement_slot=1,
    params:
        engine=engine_spec,
        prompts=config["prompts"],
        workloads=workload_settings,
        code=PROMPT_CODE,
        server=config["server"],
    script:
        "../scripts/build_prompts.py"


rule build_trace_prompts:
    input:
        build="results/engines/{engine}/build.json",
        model="results/models/{model}.json",
    output:
        "results/prompts/{engine}/{model}.trace-{trace}.json",
    log:
        "logs/build_trace_prompts/{engine}/{model}.{trace}.log",
    benchmark:
        "results/benchmarks/build_trace_prompts/{engine}/{model}.trace-{trace}.tsv"
    wildcard_constraints:
        engine=ENGINE_PATTERN,
        model=MODEL_PATTERN,
        trace=TRACE_PATTERN,
    conda:
        ENV
    resources:
        # It starts the engine to tokenize: never beside a measurement on the same machine.
        measurement_slot=1,
    params:
        engine=engine_spec,
        traces=trace_settings,
        code=PROMPT_CODE,
        server=config["server"],
    script:
        "../scripts/build_trace_prompts.py"
