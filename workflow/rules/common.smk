import json
import sys
from pathlib import Path

from snakemake.exceptions import IncompleteCheckpointException, WorkflowError
from snakemake.utils import validate

sys.path.insert(0, workflow.basedir)

from whichshot.config import check_config, check_config_file, model_file_settings
from whichshot.errors import WhichshotError
from whichshot.hashing import package_code_id
from whichshot.keyed import keyed_engine
from whichshot.snakemake_record import METADATA
from whichshot.figures.look_decision import verdict_level
from whichshot.measure.divergence_probe import probed_pairs
from whichshot.measure.estimate import estimate_words, still_finished
from whichshot.measure.kernel_probe import AFTER as KERNELS_AFTER
from whichshot.measure.kernel_probe import BEFORE as KERNELS_BEFORE
from whichshot.measure.grid import (
    all_jobs,
    measured_models,
    trace_models,
    workload_models,
)
from whichshot.measure.placement import nodes_of, probe_names, probe_node, slurm_extra
from whichshot.measure.looks import cells_in_looks, looks_of, looks_run, series_through
from whichshot.measure.order import prepare_priority, priority, run_order
from whichshot.measure.plan import prompt_entries, prompts_needed, series_plan
from whichshot.prepare.series_prompts import (
    CONTENT_ID_CHARS,
    series_prompts_path,
    unrecorded_stale,
    write_series_prompts,
)
from whichshot.report.plot_list import PLOTS

SCHEMA_FILE = "../schemas/config.schema.yaml"

try:
    for config_path in workflow.configfiles:
        check_config_file(config_path)
    config.update(check_config(config))  # with the schema's defaults
except WhichshotError as error:
    raise WorkflowError(str(error)) from None
validate(config, SCHEMA_FILE)

JOBS = {job.job_id: job for job in all_jobs(config)}
# Each series' plan: its run_series job's only params, so a setting re-measures exactly the series
# whose plans hold it (docs/protocol.md, "What re-measures what").
PLANS = {job_id: series_plan(config, job) for job_id, job in JOBS.items()}
# A prompts file made for other settings whose Snakemake record is lost would not be rebuilt: say
# which to delete, in one line, before a series' input function fails on it.
STALE_PROMPTS = unrecorded_stale(prompts_needed(JOBS.values()), METADATA)
if STALE_PROMPTS:
    raise WorkflowError(STALE_PROMPTS)
# The order the series run in (measure.order: a cell's sides alternate): run_series' priority. Not in
# the plans: a series' place changes with the grid, what it measures does not.
ORDER = run_order(list(JOBS.values()))
# Each cell's draft models: every series of a cell waits for all of them, so no side of it is ready
# (and runs) before the others can alternate with it.
CELL_DRAFTS = {}
for _job_id, _place in ORDER.items():
    _draft = PLANS[_job_id]["spec_mode"]["draft_model"]
    CELL_DRAFTS.setdefault(_place.cell, set()).update([_draft] if _draft else [])
# Run until decided (measure.looks): the planned looks (None: off) and each cell's series that run in
# them; a cell's later looks are asked for only once its previous look's decision says "continue".
LOOKS = looks_of(config["protocol"])
LOOKED_CELLS = cells_in_looks(
    list(JOBS.values()),
    {job_id: place.cell for job_id, place in ORDER.items()},
    config["protocol"],
)
LOOKED_JOBS = {job.job_id for jobs in LOOKED_CELLS.values() for job in jobs}
CELL_PATTERN = "|".join(LOOKED_CELLS).replace(".", r"\.") or "no-cell"
LOOK_FILE = "results/looks/{cell}/look{look}.json"
# Drafted series whose divergences are probed -> their undrafted counterparts (measure.divergence_probe).
DIVERGENCE_PAIRS = probed_pairs(JOBS)
# Engine -> the models its series run (the kernel probe times their weight types); none with the
# probe off (bench.kernel_probe), and then no second pass after the grid either.
KERNEL_PROBE = config["bench"]["kernel_probe"]["enabled"]
KERNEL_PROBE_MODELS = {
    engine: sorted({job.model for job in JOBS.values() if job.engine == engine})
    for engine in sorted({job.engine for job in JOBS.values()})
    if KERNEL_PROBE
}
# A finished series' shots (run_series's output).
SHOTS_FILE = "results/shots/{job}.jsonl"
# A dry run states how long the series to measure would take: those without their shots on disk
# or whose plan changed since (not in a cluster job's own Snakemake).
if workflow.output_settings.dryrun and workflow.is_main_process:
    FINISHED = frozenset(
        job
        for job in JOBS
        if still_finished(Path(SHOTS_FILE.format(job=job)), PLANS[job])
    )
    print(
        f"Estimated duration: {estimate_words(config, finished=FINISHED)}",
        file=sys.stderr,
    )
# The node each series is pinned to (None where placement.nodes is empty).
NODES = nodes_of(JOBS.values(), config["placement"])
# The hardware probes: one per placement node (its ceilings), else one.
PROBES = [f"results/hardware/{name}.json" for name in probe_names(config["placement"])]
KERNELS_AFTER_FILES = [
    f"results/hardware/after/{name}.json"
    for name in probe_names(config["placement"])
    if KERNEL_PROBE
]
PROBE_PATTERN = "|".join(probe_names(config["placement"])).replace(".", r"\.")
ENGINE_PATTERN = "|".join(config["engines"])
MODEL_PATTERN = "|".join(config["models"])
TRACE_PATTERN = "|".join(config["traces"]) or "no-trace"
# A prompts file's name: a model's, or a model's trace's (results/prompts/<engine>/<source>.json).
PROMPTS_SOURCE_PATTERN = rf"(?:{MODEL_PATTERN})(?:\.trace-(?:{TRACE_PATTERN}))?"
CONTENT_ID_PATTERN = f"[0-9a-f]{{{CONTENT_ID_CHARS}}}"
JOB_PATTERN = "|".join(JOBS).replace(".", r"\.")
ENV = "../envs/whichshot.yaml"
# The prompts are cut by this code and carry values of shots/ (their self-repetition): a change to
# either rebuilds them (and reruns what used them).
PROMPT_CODE = package_code_id("prepare", "shots")
# The figures and caveats are made by this code (its caveat rules too) and read shots/ values.
FIGURES_CODE = package_code_id("figures", "figures/caveats", "shots")


def all_outputs():
    """The final targets: tables, the report and the run's archive."""
    return [
        "results/shots.parquet",
        "results/figures.parquet",
        "results/report/index.html",
        f"results/archive/{config['run_id']}.tar.gz",
    ]


def measured_jobs():
    """Every series the run measures as far as known: all but the looks not (yet) asked for."""
    return [job_id for job_id in JOBS if job_id not in LOOKED_JOBS] + sorted(
        job_id for cell in LOOKED_CELLS for job_id in cell_series(cell)[0]
    )


def cell_series(cell):
    """A cell's series through the looks its decisions ask for, and those looks' decision files (the
    last one's checkpoint is pending until its series are done)."""
    decisions = []

    def decision_of(look):
        try:
            done = checkpoints.decide_look.get(cell=cell, look=look).output[0]
        except IncompleteCheckpointException:
            return None
        return json.loads(Path(done).read_text())["decision"]

    run = looks_run(LOOKS, decision_of)
    files = [LOOK_FILE.format(cell=cell, look=look) for look in range(1, run + 1)]
    return series_through(LOOKED_CELLS[cell], LOOKS, run), files


def look_decisions(wildcards):
    """Every looked cell's decision files (the last pending until its look's series ran)."""
    return [path for cell in LOOKED_CELLS for path in cell_series(cell)[1]]


def look_inputs(wildcards):
    """A look's checkpoint reads the cell's series of every look so far."""
    jobs = series_through(LOOKED_CELLS[wildcards.cell], LOOKS, int(wildcards.look))
    return [SHOTS_FILE.format(job=job_id) for job_id in jobs]


def shots_of_all_jobs(wildcards=None):
    return [SHOTS_FILE.format(job=job_id) for job_id in measured_jobs()]


def divergence_probes():
    """The divergence probe of every drafted series checked against an undrafted one."""
    return [f"results/divergence/{job_id}.json" for job_id in DIVERGENCE_PAIRS]


def divergence_inputs(wildcards):
    """A divergence probe reads both series' shots and starts the undrafted one's configuration."""
    undrafted = DIVERGENCE_PAIRS[wildcards.job]
    inputs = {
        key: value
        for key, value in job_inputs(wildcards).items()
        if key != "draft_model"
    }
    return {
        **inputs,
        "drafted": SHOTS_FILE.format(job=wildcards.job),
        "undrafted": SHOTS_FILE.format(job=undrafted),
    }


def divergence_plan(wildcards):
    """The undrafted counterpart's plan: the configuration the target is asked in."""
    return PLANS[DIVERGENCE_PAIRS[wildcards.job]]


def telemetry_of_all_jobs(wildcards=None):
    return [f"results/telemetry/{job_id}.jsonl" for job_id in measured_jobs()]


def workload_settings(wildcards):
    """The workloads section for a model that runs them; None for one that does not (its prompts
    file then holds no workload prompts)."""
    return config["workloads"] if wildcards.model in workload_models(config) else None


def trace_settings(wildcards):
    """The trace of this prompts file (its config entry), by name."""
    return {wildcards.trace: config["traces"][wildcards.trace]}


def job_inputs(wildcards):
    """A series needs its engine's build, its model (and draft model) and its own prompts, in a
    file named by their content."""
    job = JOBS[wildcards.job]
    inputs = {
        "build": f"results/engines/{job.engine}/build.json",
        "model": f"results/models/{job.model}.json",
        "prompts": str(
            series_prompts_path(Path(prompts_file(job)), *prompt_entries(job))
        ),
    }
    draft = PLANS[wildcards.job]["spec_mode"]["draft_model"]
    if draft:
        inputs["draft_model"] = f"results/models/{draft}.json"
    # The other sides' draft models, only to wait for them (ancient: they re-measure nothing here).
    others = sorted(CELL_DRAFTS[ORDER[wildcards.job].cell] - {draft})
    if others:
        inputs["cell_ready"] = [
            ancient(f"results/models/{name}.json") for name in others
        ]
    return inputs


def prompts_file(job):
    """The prompts file that holds the series' prompts, once built (a checkpoint, since the series'
    own file is known only from its contents). Each trace's requests have their own file, so adding
    a trace rebuilds no other."""
    if job.trace:
        built = checkpoints.build_trace_prompts.get(
            engine=job.engine, model=job.model, trace=job.trace
        )
    else:
        built = checkpoints.build_prompts.get(engine=job.engine, model=job.model)
    return built.output[0]


def job_plan(wildcards):
    return PLANS[wildcards.job]


# Each series' prompts are cut before any series starts (measure.order.prepare_priority).
PREPARE_PRIORITY = prepare_priority(len(ORDER))


def series_priority(wildcards):
    """Among the ready series, Snakemake starts the one first in the run's order."""
    return priority(ORDER[wildcards.job], len(ORDER))


def trace_prompt_files():
    """The prompts file of every trace on every engine and model that runs it."""
    return [
        f"results/prompts/{engine}/{model}.trace-{name}.json"
        for engine in config["engines"]
        for name in config["traces"]
        for model in trace_models(config, name)
    ]


def bench_outputs(wildcards=None):
    """Each series' llama-bench brackets (or why it has none): run_series writes them."""
    return [f"results/bench/{job}.json" for job in measured_jobs()]


def engine_spec(wildcards):
    """An engine's settings as a rule's params (kept in .snakemake/metadata): secrets keyed; the job
    reads them in clear from the config."""
    return keyed_engine(config["engines"][wildcards.engine])


def model_pin(wildcards):
    """A model entry as fetch_model reads it: what makes its file, not its description (which
    changes no file and so fetches nothing again)."""
    return model_file_settings(config["models"][wildcards.model])


def synthetic_donor(wildcards):
    """A synthetic-weight model needs its donor model (for the tokenizer)."""
    synthetic = config["models"][wildcards.model].get("synthetic")
    return {"donor": f"results/models/{synthetic['donor']}.json"} if synthetic else {}


def measurement_slurm_extra(wildcards):
    """sbatch options of a series: its node to itself, and which node where placement pins it."""
    return slurm_extra(NODES[wildcards.job])


def probed_node(wildcards):
    """The placement node a hardware probe reads (None: any machine)."""
    return probe_node(wildcards.probe)


def probe_slurm_extra(wildcards):
    """A hardware probe reads its placement node (or any node), alone on it."""
    return slurm_extra(probed_node(wildcards))


def probe_inputs(wildcards):
    """The builds and model files the hardware probe's engine-kernel part reads."""
    models = sorted(
        {model for names in KERNEL_PROBE_MODELS.values() for model in names}
    )
    return {
        "builds": [
            f"results/engines/{engine}/build.json" for engine in KERNEL_PROBE_MODELS
        ],
        "models": [f"results/models/{model}.json" for model in models],
    }


def probe_engine_settings():
    """Of each engine's config, only what its kernels run with (the rest may hold secrets)."""
    keys = ("kind", "threads", "gpu_layers")
    return {
        engine: {k: spec[k] for k in keys if k in spec}
        for engine, spec in config["engines"].items()
        if engine in KERNEL_PROBE_MODELS
    }


def probe_copy_threads():
    """The copy-bandwidth probe's threads: the most any engine uses."""
    threads = [spec.get("threads", 1) for spec in config["engines"].values()]
    return max(threads, default=1)


def bench_inputs(wildcards):
    return {
        "build": f"results/engines/{wildcards.engine}/build.json",
        "model": f"results/models/{wildcards.model}.json",
    }


def figure_inputs(wildcards):
    return {
        "shots": "results/shots.parquet",
        "builds": [
            f"results/engines/{engine}/build.json" for engine in config["engines"]
        ],
        "models": [f"results/models/{model}.json" for model in config["models"]],
        "bench": bench_outputs(),
        "hardware": PROBES,
        "kernels_after": KERNELS_AFTER_FILES,
        "traffic": [
            f"results/traffic/{model}.json" for model in measured_models(config)
        ],
    }


def plot_outputs():
    """Each plot of the report (whichshot/report/plot_list.py) as a report() output with its caption
    (a path from workflow/rules/, where render_report declares them)."""
    return {
        plot.name: report(
            f"results/report/{plot.name}.png",
            caption=f"../../whichshot/report/captions/{plot.name}.rst",
            category="Figures",
        )
        for plot in PLOTS
    }
