"""Run the engine's own benchmark tool at the configured prompt lengths."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from engines import load_engine
from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.measure.bench import run_engine_bench


def main(smk):
    build = json.loads(Path(smk.input.build).read_text())
    model = json.loads(Path(smk.input.model).read_text())
    argv = load_engine(smk.params.engine["kind"]).bench_argv(build, Path(model["path"]))
    rows = run_engine_bench(
        argv,
        smk.params.lengths,
        smk.params.output_tokens,
        smk.params.repetitions,
        smk.params.engine["threads"],
    )
    write_json_atomic(
        Path(smk.output[0]),
        {
            "engine": smk.wildcards.engine,
            "model": smk.wildcards.model,
            "build_id": build["build_id"],
            "model_sha256": model["sha256"],
            "rows": rows,
        },
    )


run_script(snakemake, main)
