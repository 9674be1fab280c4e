"""Tokenize the traces' requests with the engine's own tokenizer (and chat template)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.prepare.tokenizing import tokenizing_engine
from whichshot.prepare.trace_prompts import build_trace_prompts


def main(smk):
    build = json.loads(Path(smk.input.build).read_text())
    model = json.loads(Path(smk.input.model).read_text())
    log_path = Path(smk.log[0]).with_suffix(".server.log")
    engine = smk.config["engines"][smk.wildcards.engine]  # secrets in clear (params.engine: keyed)
    with tokenizing_engine(engine, smk.config["server"], build, model, log_path) as tok:
        traces = build_trace_prompts(tok.server, smk.params.traces, tok.has_chat_template, tok.bos_token_id)
    write_json_atomic(Path(smk.output[0]), {"traces": traces})


run_script(snakemake, main)
