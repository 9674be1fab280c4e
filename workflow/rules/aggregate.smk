# After each look of a cell that runs until decided (protocol.until_decided): its verdicts at the
# looks' level and what follows (figures.look_decision); look k+1's series are asked for only when
# this says "continue".
checkpoint decide_look:
    input:
        look_inputs,
    output:
        LOOK_FILE,
    log:
        "logs/decide_look/{cell}/look{look}.log",
    wildcard_constraints:
        cell=CELL_PATTERN,
        look=r"\d+",
    # Right after its look: before the next cell's series, so the cell's next look keeps its place.
    priority: PREPARE_PRIORITY
    conda:
        ENV
    params:
        looks=config["protocol"]["until_decided"],
        warm_fraction=config["protocol"]["warm_fraction"],
        margin=config["protocol"]["verdict_margin"],
    script:
        "../scripts/decide_look.py"


rule aggregate_shots:
    input:
        shots=shots_of_all_jobs,
        telemetry=telemetry_of_all_jobs,
        divergence=divergence_probes(),
        # Run until decided: each cell's look decisions, walked (the later looks' series only after a
        # "continue").
        looks=look_decisions,
    output:
        shots="results/shots.parquet",
        telemetry="results/telemetry.parquet",
    log:
        "logs/aggregate_shots/aggregate_shots.log",
    benchmark:
        "results/benchmarks/aggregate_shots.tsv"
    conda:
        ENV
    params:
        run_id=config["run_id"],  # stamped on every shot here: a new run_id re-measures nothing
    script:
        "../scripts/aggregate_shots.py"
