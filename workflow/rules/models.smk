rule fetch_model:
    input:
        unpack(synthetic_donor),
    output:
        "results/models/{model}.json",
    log:
        "logs/fetch_model/{model}.log",
    wildcard_constraints:
        model=MODEL_PATTERN,
    conda:
        ENV
    params:
        spec=model_spec,
        cache_dir=config["cache_dir"],
    script:
        "../scripts/fetch_model.py"
