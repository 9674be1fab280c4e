"""Cut the prompts to exact token counts with the engine's own tokenizer."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.prepare.corpus import load_corpus
from whichshot.prepare.prompts import cut_prompts
from whichshot.prepare.tokenizing import tokenizing_engine
from whichshot.prepare.workload_prompts import build_workload_prompts


def main(smk):
    build = json.loads(Path(smk.input.build).read_text())
    model = json.loads(Path(smk.input.model).read_text())
    log_path = Path(smk.log[0]).with_suffix(".server.log")
    engine = smk.config["engines"][smk.wildcards.engine]  # secrets in clear (params.engine: keyed)
    with tokenizing_engine(engine, smk.config["server"], build, model, log_path) as tok:
        corpus = load_corpus(smk.params.prompts["corpus"])
        prompts = cut_prompts(tok.server, corpus, smk.params.prompts["lengths"], tok.bos_token_id)
        workloads = smk.params.workloads  # None: this model runs no workload
        prompts["workloads"] = (
            build_workload_prompts(tok.server, workloads, tok.has_chat_template, tok.bos_token_id)
            if workloads
            else {}
        )
    write_json_atomic(Path(smk.output[0]), prompts)


run_script(snakemake, main)
