rule compute_figures:
    input:
        unpack(figure_inputs),
    output:
        figures="results/figures.parquet",
        caveats="results/caveats.parquet",
    log:
        "logs/compute_figures/compute_figures.log",
    benchmark:
        "results/benchmarks/compute_figures.tsv"
    conda:
        ENV
    params:
        warm_fraction=config["protocol"]["warm_fraction"],
        verdict_margin=config["protocol"]["verdict_margin"],
        # Lower per look where the grid runs until decided (figures.look_decision).
        verdict_level=verdict_level(config["protocol"]),
        # The figures are this package's arithmetic: a change to its code derives them again.
        code=FIGURES_CODE,
    script:
        "../scripts/compute_figures.py"


rule check_claims:
    input:
        claims=config["claims"],
        figures="results/figures.parquet",
        shots="results/shots.parquet",
        hardware=PROBES,
    output:
        "results/claims.parquet",
    log:
        "logs/check_claims/check_claims.log",
    benchmark:
        "results/benchmarks/check_claims.tsv"
    conda:
        ENV
    script:
        "../scripts/check_claims.py"


rule check_claims_against:
    input:
        claims=config["claims"],
    output:
        table="results/claims_check/claims.parquet",
        markdown="results/claims_check/claims.md",
        html="results/claims_check/claims.html",
    log:
        "logs/check_claims_against/check_claims_against.log",
    conda:
        ENV
    params:
        run=config.get("claims_against"),
    script:
        "../scripts/check_claims_against.py"


rule claims_check:
    input:
        rules.check_claims_against.output,


rule render_report:
    input:
        claims="results/claims.parquet",
        figures="results/figures.parquet",
        caveats="results/caveats.parquet",
        shots="results/shots.parquet",
        builds=[f"results/engines/{engine}/build.json" for engine in config["engines"]],
        models=[f"results/models/{model}.json" for model in config["models"]],
    output:
        **plot_outputs(),
        html=report(
            "results/report/index.html",
            caption="../report/index.rst",
            category="Report",
        ),
        summary=report(
            "results/report/summary.md",
            caption="../report/summary.rst",
            category="Report",
        ),
    log:
        "logs/render_report/render_report.log",
    benchmark:
        "results/benchmarks/render_report.tsv"
    conda:
        ENV
    params:
        run_id=config["run_id"],
        privacy={
            "show_text": config["report"]["show_text"],
            "include_inputs": config["archive"]["include_inputs"],
        },
        compare_with=config["report"]["compare_with"],
    script:
        "../scripts/render_report.py"
