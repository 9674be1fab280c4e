checkpoint build_prompts:
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
    script:
        "../scripts/build_prompts.py"


checkpoint build_trace_prompts:
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
    script:
        "../scripts/build_trace_prompts.py"


# A series' own prompts, named by their content (whichshot.prepare.series_prompts): the one prompts
# file a series reads. Its input is ancient: a rebuilt prompts file that left these entries as they
# were reruns no series that sends them, and one that changed them is a file of another name. A run
# block, so only an edit of this block, not of a script file's date, would write them anew.
rule series_prompts:
    input:
        ancient("results/prompts/{engine}/{source}.json"),
    output:
        "results/prompts/{engine}/{source}/{entries}.{content_id}.json",
    log:
        "logs/series_prompts/{engine}/{source}/{entries}.{content_id}.log",
    wildcard_constraints:
        engine=ENGINE_PATTERN,
        source=PROMPTS_SOURCE_PATTERN,
        entries=r"[A-Za-z0-9_-]+",
        content_id=CONTENT_ID_PATTERN,
    priority: PREPARE_PRIORITY
    conda:
        ENV
    script:
        "../scripts/series_prompts.py"
