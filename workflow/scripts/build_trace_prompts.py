"""Tokenize the traces' requests with the engine's own tokenizer (and chat template)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.engines import load_engine
from whichshot.entry import run_script
from whichshot.measure.settings import server_settings
from whichshot.prepare.trace_prompts import build_trace_prompts


def main(smk):
    build = json.loads(Path(smk.input.build).read_text())
    model = json.loads(Path(smk.input.model).read_text())
    meta = model["metadata"]
    engine = load_engine(smk.params.engine["kind"])
    # Tokenising needs no context: the smallest window keeps the helper process light.
    settings = server_settings(smk.params.engine, smk.params.server, context_tokens=512)
    server = engine.start(build, Path(model["path"]), settings, Path(smk.log[0]).with_suffix(".server.log"))
    try:
        bos = meta["bos_token_id"] if meta.get("add_bos_token") else None
        traces = build_trace_prompts(server, smk.params.traces, meta["has_chat_template"], bos)
    finally:
        server.stop()
    write_json_atomic(Path(smk.output[0]), {"traces": traces})


run_script(snakemake, main)
