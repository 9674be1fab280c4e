rule aggregate_shots:
    input:
        shots=shots_of_all_jobs(),
        telemetry=telemetry_of_all_jobs(),
        divergence=divergence_probes(),
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
