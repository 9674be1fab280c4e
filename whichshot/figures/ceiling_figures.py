"""The wall physics allows, beside every speed (seed 002: 936 GB/s / ~15 GB of weights ~ 60 tok/s,
so a bare 47.3 tok/s sits at the bandwidth wall and 381 needs more tokens per weight read).

Decode ceiling = peak bandwidth / bytes read per generated token (the weights one token touches,
plus the KV cache at the cell's mean context). Prefill ceiling = peak compute / FLOPs per prompt
token (2 x the parameters a prompt token multiplies: no output head, no last-layer FFN; plus
attention over the mean context P/2). Peaks are this CPU's, measured by our probes (the copy on the
engines' threads; on CPU the compute peak of the engine's own kernels at the model's weight types,
else a float32 GEMM), or the GPU's, from a cited table (assumed); the per-token costs come from the
model's GGUF file. A ceiling rests on that model of the machine: it is inferred, and so is every
share of it. A share above 1 is a defect of the ceiling (caveat share_above_ceiling), except a
drafted decode's: more than one token per weight read.
"""

import time
from dataclasses import dataclass
from typing import Any

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, cell_id, group_cells
from whichshot.measure.kernel_probe import BEFORE
from whichshot.telemetry.gpus import NO_GPU_ENGINE

# (metric suffix, probe key of the measured samples, its method key, unit): our probes' peaks (a key
# an older probe lacks gives no figure)
_PROBED = (
    ("copy_bandwidth_bytes_s", "copy_samples_s", "copy_method", "B/s"),
    ("copy_one_thread_bandwidth_bytes_s", "copy_one_thread_samples_s", "copy_one_thread_method", "B/s"),
    ("gemm_flop_s", "gemm_samples_s", "gemm_method", "FLOP/s"),
)
_MODEL_FACTS = (
    ("weight_bytes_per_token", "B"),
    ("kv_bytes_per_context_token", "B"),
    ("active_parameters_per_token", "parameters"),
    ("prefill_parameters_per_token", "parameters"),
    ("attention_flops_per_context_token", "FLOP"),
)
# The engine's kernels: each ggml type's measured peak, and a model's mix of them (cell engine, model)
ENGINE_MATMUL = "engine_matmul_flop_s"
PROBE_FILE = "results/hardware/probe.json"  # an older probe's, which does not name its file
# device -> (bandwidth peak, compute peak) metrics, first choice first: a cell runs against our own
# probe of its device where there is one, else (GPU) the vendor's table
_PEAKS = {
    "cpu": (("cpu_copy_bandwidth_bytes_s",), (f"cpu_{ENGINE_MATMUL}", "cpu_gemm_flop_s")),
    "gpu": (
        ("gpu_copy_bandwidth_bytes_s", "gpu_peak_bandwidth_bytes_s"),
        ("gpu_gemm_flop_s", "gpu_peak_flop_s"),
    ),
}


@dataclass(frozen=True)
class Machine:
    """One probed machine: its probe, its host name (None in an older probe: any), the GPU whose
    peaks its figures give, and the cell those figures are about ({}: the run's one machine; a
    placement node's probe names the node)."""

    probe: dict[str, Any]
    hostname: str | None
    gpu: dict[str, Any] | None
    cell: Cell


def ceiling_figures(catalog: Catalog) -> list[figure.Figure]:
    if not catalog.probes:
        return []
    machines = probed_machines(catalog.probes)
    peaks = {cell_id(machine.cell): _peaks(machine) for machine in machines}
    pairs = set(catalog.shots[["engine", "model"]].itertuples(index=False, name=None))
    kernels = {cell_id(m.cell): _kernel_peaks(m) for m in machines}
    mixes = {key: _kernel_mixes(kernels[key], pairs, catalog.traffic) for key in kernels}
    facts = {
        model: {f.metric: f for f in _model_facts(model, traffic)}
        for model, traffic in catalog.traffic.items()
    }
    figures = [f for per_machine in peaks.values() for f in per_machine.values()]
    figures += [f for per_machine in (*kernels.values(), *mixes.values()) for f in per_machine.values()]
    figures += [f for per_model in facts.values() for f in per_model.values()]
    for cell, rows in group_cells(catalog.shots):
        machine = machine_of(machines, set(rows["hostname"]))
        device = _device(rows, machine.gpu) if machine else None
        if cell["model"] in facts and device and (rows["status"] == "ok").any():
            mix = mixes[cell_id(machine.cell)].get((cell["engine"], cell["model"]))
            theirs = {**peaks[cell_id(machine.cell)], **({mix.metric: mix} if mix else {})}
            figures += _cell_ceilings(catalog, cell, rows, _PEAKS[device], theirs, facts[cell["model"]])
    return figures


def machine_of(machines: list[Machine], hosts: set[str]) -> Machine | None:
    """The probed machine a cell's shots ran on: None where they ran on several, or on one that no
    probe read (its ceiling would be another machine's)."""
    if len(hosts) != 1:
        return None
    return next((m for m in machines if m.hostname is None or {m.hostname} == hosts), None)


def probed_machines(probes: list[dict[str, Any]]) -> list[Machine]:
    """Each probed machine once (placement nodes probed outside Slurm are one machine, read once)."""
    machines: dict[str | None, Machine] = {}
    for probe in probes:
        node = probe.get("node")  # the placement node it read; None: whatever machine ran it
        gpu = probe["gpus"][0] if probe["gpus"] else None
        cell = {"node_requested": node} if node else {}
        machines.setdefault(node, Machine(probe, probe["host"].get("hostname"), gpu, cell))
    return list(machines.values())


def _peaks(machine: Machine) -> dict[str, figure.Figure]:
    """A machine's peaks by metric: our probe's of its CPU and GPU (measured), the GPU's table's."""
    probe, gpu, cell = machine.probe, machine.gpu, machine.cell
    source = f"hardware-probe:{probe.get('file', PROBE_FILE)}"
    measured = gpu.get("measured", {}) if gpu else {}
    found = _probed("cpu", probe["cpu"], probe["host"].get("cpu_model") or "this CPU", cell, source)
    if "copy_samples_s" in measured:
        found += _probed("gpu", measured, measured["name"], cell, source)
    found += _gpu_peaks(gpu, cell) if gpu and gpu.get("peaks") else []
    return {f.metric: f for f in found}


def _device(rows, gpu: dict[str, Any] | None) -> str | None:
    """Which peaks a cell runs against: "gpu" when its shots sampled the probed GPU, "cpu" when its
    engine uses no GPU (or the machine has none), None when it is not known (then no ceiling)."""
    sampled = rows["telemetry_gpus"].dropna()
    if len(sampled):
        return "gpu" if gpu and set(sampled.str.split("|").str[0]) == {gpu["uuid"]} else None
    if gpu is None or (rows["telemetry_gpu_choice"] == NO_GPU_ENGINE).all():
        return "cpu"
    return None


def _probed(device: str, probe: dict[str, Any], name: str, cell: Cell, source: str) -> list[figure.Figure]:
    """Our probe's peaks of one device (measured): its work over its fastest repetition."""
    found = []
    for suffix, samples, method, unit in _PROBED:
        if samples not in probe:
            continue
        work = probe[suffix] * min(probe[samples])
        found.append(
            figure.from_source(
                f"{device}_{suffix}",
                "probe_best",
                {"samples_s": probe[samples], "work": work},
                [source],
                unit,
                cell=cell,
                formula=f"work / fastest repetition: {probe[method]}",
                computed_by=ceiling_figures,
                timed_by="whichshot hardware probe",
                which_shot=f"our probe on {name}, before the shots",
            )
        )
    return found


def _gpu_peaks(gpu: dict[str, Any], cell: Cell) -> list[figure.Figure]:
    peaks = gpu["peaks"]
    found = []
    for metric, key, unit in (("gpu_peak_bandwidth_bytes_s", "bandwidth_bytes_s", "B/s"),
                              ("gpu_peak_flop_s", "compute_flop_s", "FLOP/s")):  # fmt: skip
        if peaks.get(key) is None:
            continue
        found.append(
            figure.given(
                metric,
                float(peaks[key]),
                unit,
                "constant",
                f"hardware-table:{peaks['name']}",
                cell=cell,
                formula=f"the vendor's peak: {peaks['source']}",
                computed_by=ceiling_figures,
                timed_by="vendor datasheet",
                which_shot=f"{gpu['name']} ({gpu['uuid']}): not measured here",
            )
        )
    return found


def _kernel_peaks(machine: Machine) -> dict[tuple[str, str], figure.Figure]:
    """(engine, ggml type) -> the measured peak of the engine's kernels of that type on this machine:
    the fastest pass of the probe (before the grid, and after it where it ran again)."""
    source = f"engine-kernel-probe:{machine.probe.get('file', PROBE_FILE)}"
    passes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for probe in machine.probe.get("engine_kernels", []):
        if probe.get("not_measured") is None:  # else the probe file says why; no value
            passes.setdefault((probe["engine"], probe["weight_type"]), []).append(probe)
    found = {}
    for (engine, weight_type), records in passes.items():
        probe = max(records, key=lambda r: r["flops_per_run"] / min(r["samples_s"]))
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(probe["measured_at_unix_s"]))
        bracket = probe.get("bracket", BEFORE)  # a probe from before the second pass: before
        found[(engine, weight_type)] = figure.from_source(
            f"{probe['device']}_engine_matmul_{weight_type.lower()}_flop_s",
            "probe_best",
            {"samples_s": probe["samples_s"], "work": probe["flops_per_run"]},
            [f"{source}#{engine}/{weight_type}/{r.get('bracket', BEFORE)}" for r in records],
            "FLOP/s",
            cell={**machine.cell, "engine": engine},
            formula=f"work / fastest repetition of the faster of {len(records)} pass(es) (this one "
            f"{bracket}): {probe['method']}; argv {' '.join(probe['argv'])}; build {probe['build_id']}",
            computed_by=ceiling_figures,
            timed_by="llama-bench, run by our engine-kernel probe",
            which_shot=f"our probe of {engine}'s {weight_type} kernels on {probe['hostname']}, {when}, "
            f"{bracket}",
        )
    return found


def _kernel_mixes(
    kernels: dict[tuple[str, str], figure.Figure],
    pairs: set[tuple[str, str]],
    traffic: dict[str, dict[str, Any]],
) -> dict[tuple[str, str], figure.Figure]:
    """(engine, model) -> the engine's kernel peak over the model's mix of weight types (derived), for
    each pair whose every type was measured on the machine of `kernels`."""
    found = {}
    for engine, model in sorted(pairs):
        mix = traffic.get(model, {}).get("prefill_matrix_parameters_by_type") or {}
        parts = [(kernels.get((engine, t)), weight) for t, weight in sorted(mix.items())]
        if not parts or any(peak is None for peak, _ in parts):
            continue
        inputs = [peak for peak, _ in parts]
        words = ", ".join(f"{t} {w:.3g}" for t, w in sorted(mix.items()))
        mixed = figure.from_figures(
            f"{inputs[0].metric.split('_')[0]}_{ENGINE_MATMUL}",
            inputs,
            "harmonic_mix",
            unit="FLOP/s",
            cell={**inputs[0].axes, "model": model},
            parameters={"weights": [weight for _, weight in parts]},
            formula=f"the model's prefill-matrix parameters / sum over its weight types of (parameters / "
            f"that type's engine-kernel peak); parameters per prompt token by type: {words}",
            computed_by=ceiling_figures,
        )
        found[(engine, model)] = mixed
    return found


def _model_facts(model: str, traffic: dict[str, Any]) -> list[figure.Figure]:
    return [
        figure.from_source(
            metric,
            "model_file_fact",
            {"value": float(traffic[metric])},
            [f"gguf:{traffic['sha256']}"],
            unit,
            cell={"model": model},
            formula=f"from the GGUF's tensor sizes and shape: {traffic['rules']}",
            computed_by=ceiling_figures,
            timed_by="the model file",
            which_shot="no shot: the model file",
        )
        for metric, unit in _MODEL_FACTS
        if metric in traffic  # an older run's file lacks the newer facts
    ]


def _cell_ceilings(
    catalog: Catalog,
    cell: Cell,
    rows,
    device_peaks: tuple[tuple[str, ...], tuple[str, ...]],
    peaks: dict[str, figure.Figure],
    facts: dict[str, figure.Figure],
) -> list[figure.Figure]:
    bandwidth, compute = (next((peaks[m] for m in choices if m in peaks), None) for choices in device_peaks)
    selection = catalog.rule(cell["protocol"]).select(rows, "prompt_tokens")
    found = []
    decode_costs = [facts["weight_bytes_per_token"], facts["kv_bytes_per_context_token"]]
    # An older traffic file has no parameters per prompt token: its ceiling counts the head (too low).
    parameters = facts.get("prefill_parameters_per_token", facts["active_parameters_per_token"])
    prefill_costs = [parameters, facts["attention_flops_per_context_token"]]
    plans = (
        ("decode", bandwidth, ["prompt_tokens", "output_tokens"], decode_costs, "decode_ceiling"),
        ("prefill", compute, ["prompt_tokens"], prefill_costs, "prefill_ceiling"),
    )
    for phase, peak, columns, costs, aggregation in plans:
        speed = catalog.find(cell, f"{phase}_tok_s")
        if peak is None or speed is None or selection.rows.empty:
            continue
        ceiling = figure.from_shots(
            f"{phase}_ceiling_tok_s",
            cell,
            selection,
            aggregation,
            columns,
            unit="tok/s",
            inputs=[peak, *costs],
            formula=_CEILING_WORDS[phase].format(peak=peak.metric, parameters=parameters.metric),
            computed_by=ceiling_figures,
        )
        share = figure.from_figures(
            f"{phase}_share_of_ceiling",
            [speed, ceiling],
            "ratio",
            unit="ratio",
            formula=f"the cell's {phase} tok/s / its {phase} ceiling (above 1: more than one token per "
            "weight read)"
            if phase == "decode"
            else f"the cell's {phase} tok/s / its {phase} ceiling",
            computed_by=ceiling_figures,
        )
        found += [ceiling, share]
    return found


_CEILING_WORDS = {
    "decode": "{peak} / (weight bytes per token + KV bytes per context token x (median prompt tokens + "
    "median output tokens / 2)) over the cell's rule's shots",
    "prefill": "{peak} / (2 x {parameters} + attention FLOPs per context token x median prompt tokens / 2) "
    "over the cell's rule's shots",
}
