#!/usr/bin/env bash
# The GPU references of issues 41, 45 and 52, run on a machine without network from an offline bundle
# (docs/offline.md) that carries their configs (config/gpu-speedup-model.yaml, config/gpu-cold-warm.yaml,
# config/gpu-vllm.yaml): install it, then run, each in a fresh copy of the bundle's project folder,
# the speed-up model's grid, the cold/warm grid twice (the repeat pair tools/repeatability.py
# compares) or vLLM beside llama.cpp. Each run's results folder, its snakemake log and its wall time
# are packed into OUT_DIR/<name>.tar.gz.
#
# Usage: tools/gpu_reference_runs.sh BUNDLE_TAR WORK_DIR OUT_DIR CORES [RUN ...]
#   RUN: speedup, coldwarm_a, coldwarm_b, vllm, seed002 (config/gpu-seed-002.yaml, issue 50)
#        (default: the first three, in that order); a run
#   whose config the bundle does not carry is skipped with a line saying so
# Start it with setsid and poll WORK_DIR/done; WORK_DIR/progress.log says what ran, how far each run
# is (snakemake's steps done) and how long it took.
set -uo pipefail
bundle=$1 work=$2 out=$3 cores=$4
shift 4
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(speedup coldwarm_a coldwarm_b)
mkdir -p "$work" "$out"
log=$work/progress.log
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$log"; }

if [ ! -x "$work/venv/bin/snakemake" ]; then
    say "unpacking and installing $bundle"
    tar xf "$bundle" -C "$work" || { say "tar failed"; touch "$work/done"; exit 1; }
    # The bundle's folder is named after it (python -m whichshot.offline build -o NAME.tar): link it.
    top=$(tar tf "$bundle" | head -1 | cut -d/ -f1)
    [ "$top" = whichshot-bundle ] || ln -sfn "$work/$top" "$work/whichshot-bundle"
    python3 "$work/whichshot-bundle/install.py" --venv "$work/venv" --cache "$work/cache" --cores "$cores" \
        >"$work/install.log" 2>&1 || { say "install failed"; tail -20 "$work/install.log" | tee -a "$log"; touch "$work/done"; exit 1; }
fi

config_of() {
    case $1 in
        speedup) echo gpu-speedup-model ;;
        coldwarm_*) echo gpu-cold-warm ;;
        vllm) echo gpu-vllm ;;
        seed002) echo gpu-seed-002 ;;
    esac
}

# What the vLLM run rests on, in the progress log before it starts: the interpreter its venv layers on
# (config/gpu-vllm.yaml's site_python) with its torch, and the glibc the wheels need (2.31 or later).
preflight_vllm() {
    local site=/opt/torch/.venv/bin/python3
    say "vllm: glibc $(ldd --version 2>&1 | head -1 | awk '{print $NF}'), site_python $site: $("$site" -c \
        'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' 2>&1 | tail -1)"
}

for run in "${runs[@]}"; do
    config=$(config_of "$run")
    # The installer printed one command per config; run it in this run's own copy of the project.
    command=$(grep -F -- "--configfile ../configs/$config.yaml" "$work/install.log" | head -1)
    [ -n "$command" ] || { say "$run: no command for $config in install.log"; continue; }
    rm -rf "$work/$run" && cp -r "$work/whichshot-bundle/project" "$work/$run"
    ln -sfn "$work/whichshot-bundle/configs" "$work/configs"
    command="cd $work/$run && ${command#*&& }"
    [ "$run" = vllm ] && preflight_vllm
    say "$run: start ($config)"
    start=$(date +%s)
    bash -c "$command" >"$work/$run/snakemake.log" 2>&1 &
    pid=$!
    # Snakemake's own count of finished steps, into the progress log as it changes (every 20 s).
    last=
    while kill -0 "$pid" 2>/dev/null; do
        sleep 20
        step=$(grep -E '^[0-9]+ of [0-9]+ steps' "$work/$run/snakemake.log" 2>/dev/null | tail -1)
        [ -n "$step" ] && [ "$step" != "$last" ] && say "$run: $step" && last=$step
    done
    wait "$pid"
    status=$?
    seconds=$(( $(date +%s) - start ))
    say "$run: exit $status after $seconds s"
    echo "$seconds" >"$work/$run/results/wall_s.txt" 2>/dev/null
    cp "$work/$run/snakemake.log" "$work/$run/results/" 2>/dev/null
    tar czf "$out/$run.tar.gz" -C "$work/$run" --exclude='results/telemetry/*' results 2>/dev/null \
        || say "$run: nothing to pack"
done
touch "$work/done"
