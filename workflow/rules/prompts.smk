rule build_prompts:
    input:
        build="results/engines/{engine}/build.json",
        model="results/models/{model}.json",
    output:
        "results/prompts/{engine}/{model}.json",
    log:
        "logs/build_prompts/{engine}/{model}.log",
    params:
        engine=engine_spec,
        prompts=config["prompts"],
        server=config["server"],
    script:
        "../scripts/build_prompts.py"
