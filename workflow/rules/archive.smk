rule archive_run:
    input:
        rules.aggregate_shots.output,
        rules.compute_figures.output,
        rules.check_claims.output,
        rules.render_report.output,
        [f"results/engines/{engine}/build.json" for engine in config["engines"]],
        [f"results/models/{model}.json" for model in config["models"]],
        [f"results/traffic/{model}.json" for model in measured_models(config)],
        PROBES,
        KERNELS_AFTER_FILES,
        expand(
            "results/prompts/{engine}/{model}.json",
            engine=config["engines"],
            model=measured_models(config),
        ),
        trace_prompt_files(),
        bench_outputs,
        divergence_probes(),
        look_decisions,  # run until decided: each cell's decision after each look it ran
    output:
        archive=f"results/archive/{config['run_id']}.tar.gz",
    log:
        "logs/archive_run/archive_run.log",
    benchmark:
        "results/benchmarks/archive_run.tsv"
    conda:
        ENV
    script:
        "../scripts/archive_run.py"
