"""Build (or reuse the cached build of) one engine; write its build.json."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root
from whichshot.engine import load_engine
from whichshot.entry import run_script
from whichshot.host import allowed_cores


def main(smk):
    spec = smk.config["engines"][smk.wildcards.engine]  # secrets in clear (params.spec holds them keyed)
    # Every core this job may use, whatever --cores says: a build is no measurement, and it holds
    # the machine's measurement lock while it compiles, so no measurement runs beside it.
    build = load_engine(spec["kind"]).build(spec, cache_root(smk.params.cache_dir), allowed_cores())
    write_json_atomic(Path(smk.output[0]), build)


run_script(snakemake, main)
