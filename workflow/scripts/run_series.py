"""Run one series of shots (one grid job) with telemetry; write shots and samples as JSONL."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.engine import load_engine
from whichshot.engine.settings import server_settings
from whichshot.entry import run_script
from whichshot.host import host_identity
from whichshot.measure.grid import Job, all_jobs
from whichshot.measure.placement import check_on_its_node
from whichshot.measure.progress import grid_progress
from whichshot.measure.protocol import JobContext
from whichshot.measure.series import SeriesOutputs, measure_series
from whichshot.spec_modes import kind_settings, uses_draft_model
from whichshot.tell import tell


def main(smk):
    job = Job(**smk.params.job)
    identity = host_identity()
    check_on_its_node(job, identity["slurm_node"], identity["hostname"])
    engine_spec = smk.params.engines[job.engine]
    model = json.loads(Path(smk.input.model).read_text())
    prompts = json.loads(Path(smk.input.prompts).read_text())
    engine = load_engine(engine_spec["kind"])
    spec_mode = smk.params.spec_modes.get(job.spec_mode, {})
    mode_settings = kind_settings(spec_mode, engine.kind)  # the grid only makes jobs where it applies
    draft_json = getattr(smk.input, "draft_model", None)
    use_draft = draft_json and uses_draft_model(mode_settings, engine.kind)
    draft_path = Path(json.loads(Path(draft_json).read_text())["path"]) if use_draft else None
    spec_args = tuple(engine.speculative_args(mode_settings, draft_path))
    ctx = JobContext(
        job=job,
        run_id=smk.params.run_id,
        engine=engine,
        build=json.loads(Path(smk.input.build).read_text()),
        model_path=Path(model["path"]),
        model=model,
        prompts=prompts,
        settings=server_settings(
            engine_spec,
            smk.params.server,
            job.context_tokens_requested,
            spec_args,
            job.engine_warmup,
            job.prefill_chunk_tokens,
            job.parallel_streams,
            job.compile_cache,
        ),
        output_tokens=smk.params.protocol["output_tokens"],
        workload_output_tokens=smk.params.workloads["max_output_tokens"],
        spec_params=spec_mode,
        shot_timeout_s=smk.params.server["shot_timeout_s"],
        log_dir=Path(smk.params.log_dir.replace("results/shots", "logs/engines")),
        identity=identity,
    )
    progress = grid_progress(all_jobs(smk.config), Path(smk.output.shots).parent)
    ctx.progress = lambda position: tell(progress.line(job.job_id, position, job.series_length))
    outputs = SeriesOutputs(Path(smk.output.shots), Path(smk.output.telemetry), Path(smk.output.bench))
    measure_series(ctx, outputs, smk.params.telemetry, smk.params.bench)


run_script(snakemake, main)
