"""Cut the prompts to exact token counts with the engine's own tokenizer."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.engines import load_engine
from whichshot.entry import run_script
from whichshot.measure.settings import server_settings
from whichshot.prepare.corpus import load_corpus
from whichshot.prepare.prompts import cut_prompts
from whichshot.prepare.workload_prompts import build_workload_prompts


def main(smk):
    build = json.loads(Path(smk.input.build).read_text())
    model = json.loads(Path(smk.input.model).read_text())
    meta = model["metadata"]
    engine = load_engine(smk.params.engine["kind"])
    # Tokenising needs no context: the smallest window keeps the helper process light.
    settings = server_settings(smk.params.engine, smk.params.server, context_tokens=512)
    log_path = Path(smk.log[0]).with_suffix(".server.log")
    server = engine.start(build, Path(model["path"]), settings, log_path)
    try:
        bos = meta["bos_token_id"] if meta.get("add_bos_token") else None
        corpus = load_corpus(smk.params.prompts["corpus"])
        prompts = cut_prompts(server, corpus, smk.params.prompts["lengths"], bos)
        workloads = smk.params.workloads  # None: this model runs no workload
        prompts["workloads"] = (
            build_workload_prompts(server, workloads, meta["has_chat_template"], bos) if workloads else {}
        )
    finally:
        server.stop()
    write_json_atomic(Path(smk.output[0]), prompts)


run_script(snakemake, main)
