rule build_engine:
    output:
        "results/engines/{engine}/build.json",
    log:
        "logs/build_engine/{engine}.log",
    benchmark:
        "results/benchmarks/build_engine/{engine}.tsv"
    wildcard_constraints:
        engine=ENGINE_PATTERN,
    conda:
        ENV
    threads: 64  # holds every core Snakemake gives; the build compiles with all the job may use
    params:
        spec=engine_spec,
        cache_dir=config["cache_dir"],
    script:
        "../scripts/build_engine.py"
