rule compute_figures:
    input:
        unpack(figure_inputs),
    output:
        figures="results/figures.parquet",
        caveats="results/caveats.parquet",
    log:
        "logs/compute_figures/compute_figures.log",
    conda:
        ENV
    params:
        warm_fraction=config["protocol"]["warm_fraction"],
    script:
        "../scripts/compute_figures.py"


rule render_report:
    input:
        figures="results/figures.parquet",
        caveats="results/caveats.parquet",
        shots="results/shots.parquet",
        builds=[f"results/engines/{engine}/build.json" for engine in config["engines"]],
        models=[f"results/models/{model}.json" for model in config["models"]],
    output:
        html=report(
            "results/report/index.html",
            caption="../report/index.rst",
            category="Report",
        ),
        shot_plot=report(
            "results/report/tok_s_by_shot_index.png",
            caption="../report/tok_s_by_shot_index.rst",
            category="Figures",
        ),
    log:
        "logs/render_report/render_report.log",
    conda:
        ENV
    params:
        run_id=config["run_id"],
    script:
        "../scripts/render_report.py"
