#!/usr/bin/env bash
# A new user's first run, timed: clone REPO into DIR, make a new venv, install, run the README's
# command, then rerun it (a no-op). CACHE is the whichshot cache the run uses: an empty folder for
# a first run, or an earlier run's cache for "the build cached". pip's own cache is not used, so
# pip downloads what a new machine would.
#
# Usage: tools/time_first_run.sh REPO DIR CACHE   (prints one "phase seconds" line per step, then
# the total of all but the rerun, and
# writes them to DIR/first_run_times.txt; run it on an idle machine)
set -euo pipefail
repo=$1 dir=$2 cache=$3
[ ! -e "$dir" ] || { echo "$dir exists: give a new folder" >&2; exit 2; }
mkdir -p "$cache"
export WHICHSHOT_CACHE=$cache PIP_NO_CACHE_DIR=1
times=()
step() {  # step NAME COMMAND...: run it, keep its wall seconds
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    times+=("$name $(echo "$end - $start" | bc)")
}
step clone git clone -q "$repo" "$dir"
cd "$dir"
step venv python3 -m venv .venv
. .venv/bin/activate
step pip_install pip install -q -e .
step snakemake_first snakemake --cores 1
step snakemake_noop snakemake --cores 1
printf '%s\n' "${times[@]}" | awk '{print; if ($1 != "snakemake_noop") s += $2} END {print "total_first_run", s}' \
    | tee first_run_times.txt
