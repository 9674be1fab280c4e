"""Build (or reuse the cached build of) one engine; write its build.json."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root
from whichshot.engines import load_engine
from whichshot.entry import run_script


def main(smk):
    spec = smk.params.spec
    build = load_engine(spec["kind"]).build(spec, cache_root(smk.params.cache_dir), smk.threads)
    write_json_atomic(Path(smk.output[0]), build)


run_script(snakemake, main)
