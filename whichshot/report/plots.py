"""Matplotlib figures for the report, drawn from figures.parquet only (a point a plot needs is a
figure row first). Readable in greyscale: every series differs by marker, line style or hatch, not
only by colour. A plot without data in this run is not drawn; its file then holds one line saying so
(Snakemake's report needs every declared file). Which plots there are, their titles and captions:
plot_list."""

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({"axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8})
import pandas as pd  # noqa: E402

from whichshot.figures.caveats.gates import gate_label, gated_out, struck_by  # noqa: E402
from whichshot.figures.trace_figures import MIX_AXES  # noqa: E402
from whichshot.report.plot_list import PLOTS  # noqa: E402
from whichshot.report.tables import LOAD_AXES, records_of  # noqa: E402
from whichshot.shots.axes import AXES, AXIS, BASE_WORKLOAD, NO_DRAFT, SERIES_SHAPE, TRACE_WORKLOAD  # noqa: E402  # noqa: E402

# Okabe-Ito (colour-blind safe); greyscale safety comes from the markers, lines and hatches.
_COLOURS = ("#000000", "#E69F00", "#0072B2", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINES = ("-", "--", ":", "-.")
_HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
_FILLS = ("#404040", "#f0f0f0", "#a0a0a0", "#ffffff", "#707070", "#d0d0d0", "#202020", "#c0c0c0")
CLOCK_COLUMNS = (("sm_clock_median_mhz", "GPU SM clock"), ("cpu_freq_median_mhz", "CPU clock"))
# A gated-out cell (caveats.gates) is drawn struck: cross-hatched in red, labelled why, never as ×N.
GATED_COLOUR = "#b22222"
GATED_HATCH = "xxxx"


@dataclass
class Plot:
    """One drawn (or skipped) plot of the report."""

    name: str
    title: str
    caption: str
    png: bytes | None
    reason: str = ""
    wide: bool = True


Draw = Callable[[pd.DataFrame], "plt.Figure | str"]  # a drawn plot, or why there is none
DRAW: dict[str, Draw] = {}  # the function that draws each plot of plot_list, by the plot's name


def draws(function: Draw) -> Draw:
    """Registers a plot's drawing function under its own name, the plot's name in plot_list."""
    DRAW[function.__name__] = function
    return function


def _style(n: int) -> dict:
    return {
        "color": _COLOURS[n % len(_COLOURS)],
        "marker": _MARKERS[n % len(_MARKERS)],
        "linestyle": _LINES[n % len(_LINES)],
    }


def _frame(figures: pd.DataFrame) -> pd.DataFrame:
    """Figure rows with plain values (None for missing) and only the ones that have a value."""
    frame = pd.DataFrame(records_of(figures))
    if len(frame):  # "" where the run compares no nodes: keys and filters compare plain strings
        frame["node_requested"] = frame["node_requested"].fillna("")
    return frame[frame["value"].notna()] if len(frame) else frame


def _on(node: str) -> str:
    """' on <node>' for a cell of a node comparison, else ''."""
    return f" on {node}" if node else ""


def _per_cell(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    return frame[(frame["metric"] == metric) & frame["shot_index"].isna()]


def _constant(frame: pd.DataFrame, metric: str) -> float:
    return float(frame.loc[frame["metric"] == metric, "value"].iloc[0])


def _modes_in_order(modes) -> list[str]:
    """The no-draft mode first, then the others in the order they appear."""
    seen = list(dict.fromkeys(modes))
    return sorted(seen, key=lambda m: (m != NO_DRAFT, seen.index(m)))


def _cell_label(row) -> str:
    """'model on gpu01 p1024 ctx4096 ub2048 reverse': the axes that tell a protocol-grid curve from the
    next (the load axes where they are not at their defaults)."""
    words = [row["model"] + _on(row.get("node_requested"))]
    for axis in ("prompt_tokens_requested", "context_tokens_requested", *LOAD_AXES):
        if not pd.isna(row.get(axis)) and row[axis] != AXIS[axis].unnamed:
            words.append(f"{AXIS[axis].prefix}{int(row[axis])}")
    if row.get("order") not in (None, "same"):
        words.append(row["order"])
    return " ".join(words)


def _tolerance_band(axis, tolerance: float, label: str) -> None:
    """Dashed lines at ±tolerance (a constant read from figures.parquet), in percent."""
    for sign in (-1, 1):
        axis.axhline(sign * tolerance * 100, color="#777777", linestyle="--", linewidth=1,
                     label=label if sign > 0 else None)  # fmt: skip


def _legend_below(fig, axes) -> None:
    handles, labels = axes[-1].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8, frameon=False
        )


# --- tok/s by shot index, clock on a second axis -------------------------------------------------


@draws
def tok_s_by_shot_index(figures: pd.DataFrame):
    frame = _frame(figures)
    base = frame[frame["workload"] == BASE_WORKLOAD] if len(frame) else frame
    if base.empty or base["shot_index"].isna().all() and _per_cell(base, "decode_tok_s").empty:
        return "no protocol-grid figures in this run"
    clock = next(((c, name) for c, name in CLOCK_COLUMNS if (base["metric"] == c).any()), None)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    for axis, metric, label in ((axes[0], "prefill_tok_s", "prefill"), (axes[1], "decode_tok_s", "decode")):
        _speed_by_index(axis, base, metric, clock)
        axis.set_xlabel("shot index (1 = first shot a process served)")
        axis.set_ylabel(f"{label} speed, client-timed (tok/s)")
        axis.set_title(f"{label.capitalize()} speed by shot index")
        axis.grid(alpha=0.3)
    _legend_below(fig, axes)
    return fig


def _speed_by_index(axis, base: pd.DataFrame, metric: str, clock: tuple[str, str] | None) -> None:
    """One colour and marker per engine/model/length/node; one line per warm cell (line style per rest)."""
    key_axes = ["engine", "model", "prompt_tokens_requested", "node_requested"]
    keys = list(dict.fromkeys(base[key_axes].itertuples(index=False, name=None)))
    twin = axis.twinx() if clock else None
    cold = _per_cell(base, metric)
    for _, row in cold[cold["protocol"] == "cold"].iterrows():
        style = _style(keys.index(tuple(row[a] for a in key_axes)))
        axis.scatter(
            [0.8],
            [row["value"]],
            marker=style["marker"],
            facecolors="none",
            edgecolors=style["color"],
            label=f"{_cell_label(row)} cold (fresh processes)",
        )
    points = base[(base["metric"] == metric) & base["shot_index"].notna()]
    for m, (_cell, curve) in enumerate(points.groupby("cell_id", sort=False)):
        first = curve.iloc[0]
        style = {
            **_style(keys.index(tuple(first[a] for a in key_axes))),
            "linestyle": _LINES[m % len(_LINES)],
        }
        curve = curve.sort_values("shot_index")
        axis.plot(
            curve["shot_index"],
            curve["value"],
            **style,
            label=f"{_cell_label(first)} warm, {first['rest_s']:g} s rest",
        )
        _strike_gated(axis, curve["shot_index"].tolist(), curve)  # a prefill read from the cache
        if twin is not None:
            clocks = base[
                (base["cell_id"] == first["cell_id"])
                & (base["metric"] == clock[0])
                & base["shot_index"].notna()
            ].sort_values("shot_index")
            twin.plot(
                clocks["shot_index"],
                clocks["value"],
                color=style["color"],
                linestyle=":",
                marker="x",
                linewidth=1,
                alpha=0.7,
            )
    if twin is not None:
        _clock_axis(twin, base.loc[base["metric"] == clock[0], "value"], clock[1])
    else:
        axis.text(0.99, 0.02, "clock not measured", transform=axis.transAxes, ha="right", fontsize=8)
    axis.set_xlim(left=0.5)


def _clock_axis(twin, clocks: pd.Series, name: str) -> None:
    """Clock axis from 80 % of the top clock: a 0.5 % wobble must not look like a cliff."""
    top = clocks.max()
    twin.set_ylim(min(clocks.min(), 0.8 * top) * 0.98, top * 1.02)
    twin.set_ylabel(f"{name}, median over the shot (MHz; dotted, ×)")


# --- rest before each warm shot ------------------------------------------------------------------

# A warm line per cell less its rest (the axis drawn); every other axis tells lines apart.
_ALL_BUT_REST = [axis for axis in AXES if axis not in ("protocol", "rest_s")]


@draws
def rest_effect(figures: pd.DataFrame):
    frame = _frame(figures)
    warm = (
        frame[(frame["workload"] == BASE_WORKLOAD) & (frame["protocol"] == "warm")] if len(frame) else frame
    )
    warm = warm[warm["shot_index"].isna() & warm["metric"].isin(["prefill_tok_s", "decode_tok_s"])]
    if warm.empty or warm.groupby(_ALL_BUT_REST, dropna=False)["rest_s"].nunique().max() < 2:
        return "only one rest interval in this run (config/full.yaml has the seed's 0/3/15/45 s)"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, metric in zip(axes, ("prefill_tok_s", "decode_tok_s"), strict=True):
        _rest_lines(axis, frame, warm[warm["metric"] == metric], metric)
        word = metric.split("_")[0]
        axis.set_xlabel("rest before each warm shot (s)")
        axis.set_ylabel(f"warm {word} speed (tok/s)")
        axis.set_title(f"Warm {word} speed by rest interval")
        axis.grid(alpha=0.3)
    _legend_below(fig, axes)
    return fig


def _rest_lines(axis, frame: pd.DataFrame, warm: pd.DataFrame, metric: str) -> None:
    cold = _per_cell(frame, metric)
    cold = cold[cold["protocol"] == "cold"]
    for n, (_key, group) in enumerate(warm.groupby(_ALL_BUT_REST, sort=False, dropna=False)):
        group = group.sort_values("rest_s")
        first, style = group.iloc[0], _style(n)
        axis.plot(group["rest_s"], group["value"], **style, label=f"{_cell_label(first)} warm")
        sibling = cold
        for column in [c for c in _ALL_BUT_REST if c not in SERIES_SHAPE]:
            sibling = sibling[
                sibling[column].fillna(-1) == (first[column] if first[column] is not None else -1)
            ]
        if len(sibling):
            axis.axhline(
                sibling["value"].iloc[0],
                color=style["color"],
                linestyle=":",
                linewidth=1,
                label=f"{_cell_label(first)} cold (shot 1, fresh process)",
            )


# --- predicted vs measured warm (clock ratio) ----------------------------------------------------


@draws
def clock_ratio(figures: pd.DataFrame):
    frame = _frame(figures)
    residuals = frame[frame["metric"].str.endswith("_clock_residual")] if len(frame) else frame
    if residuals.empty:
        return "no cold/warm pair with clock readings in this run"
    values = frame.set_index("figure_id")["value"]
    tolerance = _constant(frame, "clock_only_tolerance")
    fig, axis = plt.subplots(figsize=(6.4, 4.6), constrained_layout=True)
    for n, speed in enumerate(("prefill_tok_s", "decode_tok_s")):
        rows = residuals[residuals["metric"] == f"{speed}_clock_residual"]
        predicted = [values.get(inputs[1]) for inputs in rows["input_figure_ids"]]
        axis.scatter(
            predicted,
            rows["value"] * 100,
            marker=_MARKERS[n],
            facecolors="none" if n else _COLOURS[0],
            edgecolors=_COLOURS[0],
            label=f"{speed.split('_')[0]} (one point per warm cell)",
        )
    axis.axhline(0, color="#333333", linewidth=0.8, label="measured = predicted")
    _tolerance_band(axis, tolerance, f"±{tolerance:.0%}: only the clock changed")
    axis.set_xscale("log")
    axis.set_xlabel("predicted warm speed = cold × f_warm / f_cold (tok/s, log scale)")
    axis.set_ylabel("measured warm / predicted − 1 (%)")
    axis.set_title("Warm speed: measured against the clock-ratio prediction")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return fig


# --- workloads x speculative modes --------------------------------------------------------------


def _workload_figures(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    rows = _per_cell(frame, metric)
    return rows[_is_workload(rows)]


def _is_workload(rows: pd.DataFrame) -> pd.Series:
    """The built-in workloads' rows (a trace's requests have plots of their own)."""
    return rows["workload"].notna() & ~rows["workload"].isin((BASE_WORKLOAD, TRACE_WORKLOAD))


def _trace_figures(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """A metric's per-request figures of every trace."""
    if frame.empty:
        return frame
    rows = _per_cell(frame, metric)
    return rows[(rows["workload"] == TRACE_WORKLOAD) & rows["request_id"].notna()]


@draws
def workload_modes(figures: pd.DataFrame):
    frame = _frame(figures)
    speeds = _workload_figures(frame, "decode_tok_s")
    if speeds.empty:
        return "no workload runs in this run (workloads.names is empty)"
    panel_axes = ["engine", "model", "node_requested"]
    panels = list(dict.fromkeys(speeds[panel_axes].itertuples(index=False, name=None)))
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(11, 3.8 * len(panels)), squeeze=False, constrained_layout=True
    )
    speedups = _workload_figures(frame, "speedup_vs_none").set_index("cell_id")
    for axis, (engine, model, node) in zip(axes[:, 0], panels, strict=True):
        mine = (speeds["engine"] == engine) & (speeds["model"] == model) & (speeds["node_requested"] == node)
        _mode_bars(axis, speeds[mine], speedups)
        where = f"{engine}{_on(node)}, {model}"
        axis.set_title(f"{where}: decode speed by workload and mode (× = speed-up over none)")
        axis.set_ylabel("decode speed, client-timed (tok/s)")
        axis.grid(axis="y", alpha=0.3)
    return fig


def _mode_bars(axis, speeds: pd.DataFrame, speedups: pd.DataFrame) -> None:
    modes = _modes_in_order(speeds["spec_mode"])
    groups = list(
        dict.fromkeys(zip(speeds["workload"], speeds["text_kind"], speeds["protocol"], strict=True))
    )
    width = 0.8 / len(modes)
    for m, mode in enumerate(modes):
        rows = speeds[speeds["spec_mode"] == mode]
        for i, row in enumerate(rows.to_dict("records")):
            g = groups.index((row["workload"], row["text_kind"], row["protocol"]))
            x = g + (m - (len(modes) - 1) / 2) * width
            speedup = speedups.loc[row["cell_id"]] if row["cell_id"] in speedups.index else None
            gated = gate_label(gated_out(row) or gated_out(speedup))
            bar = axis.bar(
                x,
                row["value"],
                width,
                color="white" if gated else _FILLS[m % len(_FILLS)],
                hatch=GATED_HATCH if gated else _HATCHES[m % len(_HATCHES)],
                edgecolor=GATED_COLOUR if gated else "black",
                linewidth=0.6,
                label=mode if i == 0 else None,
            )
            bar.patches[0].set_gid(f"gated: {gated}" if gated else None)
            if gated:
                axis.text(x, row["value"], f"✗ {gated}", ha="center", va="bottom", fontsize=6,
                          color=GATED_COLOUR, rotation=90)  # fmt: skip
            elif speedup is not None:
                axis.text(x, row["value"], f"×{speedup['value']:.2f}", ha="center", va="bottom", fontsize=7)
    axis.set_xticks(range(len(groups)), [f"{w}\n{k} · {p}" for w, k, p in groups], fontsize=8)
    axis.legend(title="speculative mode", fontsize=8, title_fontsize=8)


@draws
def copy_vs_speedup(figures: pd.DataFrame):
    frame = _frame(figures)
    speedups = _workload_figures(frame, "speedup_vs_none")
    copies = _workload_figures(frame, "copy_fraction").set_index("cell_id")["value"] if len(frame) else {}
    speedups = speedups[speedups["cell_id"].isin(getattr(copies, "index", []))] if len(speedups) else speedups
    if speedups.empty:
        return "no speculative mode with a no-draft baseline in this run"
    fig, axis = plt.subplots(figsize=(7.5, 5.2), constrained_layout=True)
    for n, mode in enumerate(_modes_in_order(speedups["spec_mode"])):
        for kind, filled in (("real", True), ("synthetic", False)):
            rows = speedups[(speedups["spec_mode"] == mode) & (speedups["text_kind"] == kind)]
            if rows.empty:
                continue
            colour, xs = _COLOURS[n % len(_COLOURS)], copies[rows["cell_id"]].to_numpy() * 100
            axis.scatter(
                xs,
                rows["value"],
                marker=_MARKERS[n % len(_MARKERS)],
                s=46,
                edgecolors=colour,
                facecolors=colour if filled else "none",
                label=f"{mode}, {kind} text",
            )
            for x, row in zip(xs, rows.to_dict("records"), strict=True):
                gated = gate_label(gated_out(row))  # not the task's speed-up
                axis.annotate(
                    f"{row['workload']} ({row['protocol']}){f' ✗ {gated}' if gated else ''}",
                    (x, row["value"]),
                    fontsize=6,
                    color=GATED_COLOUR if gated else "black",
                    xytext=(4, 2),
                    textcoords="offset points",
                )
            _strike_gated(axis, xs, rows)
    _speedup_against_copy_axes(
        axis,
        "copy fraction of the drafted output (% of output tokens in ≥ k-token prompt spans)",
        "Does copying predict the speed-up? (✗: task gate failed or lossy, not a win)",
    )
    return fig


def _strike_gated(axis, xs, rows: pd.DataFrame) -> None:
    """A red cross over each point a gate strikes (caveats.gates): a speed-up that is not a win, a
    prefill read from the engine's cache."""
    gated = [gate_label(struck_by(row)) for row in rows.to_dict("records")]
    struck = [i for i, label in enumerate(gated) if label]
    if struck:
        axis.scatter([xs[i] for i in struck], rows["value"].to_numpy()[struck], marker="x", s=90,
                     color=GATED_COLOUR, label="✗ gated out (gate failed / lossy / cache hit)",
                     gid="gated: " + ", ".join(dict.fromkeys(gated[i] for i in struck)))  # fmt: skip


def _speedup_against_copy_axes(axis, xlabel: str, title: str) -> None:
    """The axes of a speed-up (y) against copy fraction (x) scatter, with the no-speed-up line."""
    axis.axhline(1.0, color="#555555", linewidth=1, linestyle="--", label="no speed-up")
    axis.set_xlabel(xlabel)
    axis.set_ylabel("speed-up over no drafting (×, decode tok/s ratio)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)


@draws
def acceptance_real_synthetic(figures: pd.DataFrame):
    rates = _workload_figures(_frame(figures), "acceptance_rate")
    if rates.empty:
        return "no drafted tokens in this run"
    keys = ["model", "workload", "spec_mode", "protocol", "engine", "node_requested"]
    groups = list(dict.fromkeys(rates[keys].itertuples(index=False, name=None)))
    fig, axis = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4.4), constrained_layout=True)
    indexed = rates.set_index([*keys, "text_kind"])["value"]
    for k, kind in enumerate(("real", "synthetic")):
        present = [(g, group) for g, group in enumerate(groups) if (*group, kind) in indexed.index]
        axis.bar(
            [g + (k - 0.5) * 0.38 for g, _ in present],
            [indexed[(*group, kind)] * 100 for _, group in present],
            0.38,
            color=_FILLS[k * 2],
            hatch=_HATCHES[k],
            edgecolor="black",
            linewidth=0.6,
            label=f"{kind} text",
        )
    labels = [f"{w}\n{m}{_on(n)} · {mode} · {p}" for m, w, mode, p, _e, n in groups]
    axis.set_xticks(range(len(groups)), labels, fontsize=7)
    axis.set_ylabel("acceptance (accepted / drafted tokens, %)")
    axis.set_ylim(0, 105)
    axis.set_title("Draft acceptance on real vs synthetic text (engine-reported counts)")
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    return fig


@draws
def ngram_warm_series(figures: pd.DataFrame):
    frame = _frame(figures)
    points = frame[(frame["metric"] == "decode_tok_s") & frame["shot_index"].notna()] if len(frame) else frame
    points = points[_is_workload(points)] if len(points) else points
    if points.empty or points["shot_index"].max() < 2:
        return "no warm workload series in this run"
    panel_axes = ["model", "workload", "text_kind", "engine", "node_requested"]
    panels = list(dict.fromkeys(points[panel_axes].itertuples(index=False, name=None)))
    columns = min(4, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(2.9 * columns + 0.6, 2.5 * rows + 0.8), squeeze=False, constrained_layout=True
    )
    modes = _modes_in_order(points["spec_mode"])
    for axis, panel in zip(axes.flat, panels, strict=False):
        cell = points[(points[panel_axes] == pd.Series(panel, index=panel_axes)).all(axis=1)]
        model, workload, kind, _engine, node = panel
        for n, mode in enumerate(modes):
            curve = cell[cell["spec_mode"] == mode].sort_values("shot_index")
            if not curve.empty:
                axis.plot(curve["shot_index"], curve["value"], **_style(n), label=mode)
        axis.set_title(f"{model}{_on(node)}\n{workload}, {kind} text", fontsize=8)
        axis.set_xlabel("shot index in the process", fontsize=8)
        axis.set_ylabel("decode tok/s", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=len(labels),
        fontsize=8,
        frameon=False,
        title="speculative mode",
        title_fontsize=8,
    )
    return fig


@draws
def client_vs_engine(figures: pd.DataFrame):
    frame = _frame(figures)
    pairs = (
        ("client_vs_engine_decode_ratio", "engine_decode_tok_s", "decode"),
        ("client_vs_engine_prefill_ratio", "engine_prefill_tok_s", "prefill"),
    )
    cells = _per_cell(frame, pairs[0][0]) if len(frame) else frame
    cells = cells[cells["protocol"].notna()] if len(cells) else cells
    if cells.empty:
        return "no cell with both client and engine timings in this run"
    tolerance = _constant(frame, "client_engine_tolerance")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, (ratio_metric, engine_metric, label) in zip(axes, pairs, strict=True):
        ratios = _per_cell(frame, ratio_metric)
        ratios = ratios[ratios["protocol"].notna()]
        speeds = _per_cell(frame, engine_metric).set_index("cell_id")["value"]
        ratios = ratios[ratios["cell_id"].isin(speeds.index)]
        for n, protocol in enumerate(("cold", "warm")):
            rows = ratios[ratios["protocol"] == protocol]
            axis.scatter(
                speeds[rows["cell_id"]],
                (rows["value"] - 1) * 100,
                marker=_MARKERS[n],
                s=22,
                facecolors="none" if n == 0 else _COLOURS[0],
                edgecolors=_COLOURS[0],
                label=f"{protocol} cells",
            )
        _tolerance_band(axis, tolerance, f"±{tolerance:.0%}")
        axis.axhline(0, color="#333333", linewidth=0.8)
        axis.set_xlabel(f"engine-reported {label} speed, the cell's figure (tok/s)")
        axis.set_ylabel(f"client / engine {label} speed − 1 (%), median over the cell's shots")
        axis.set_title(f"{label.capitalize()}: our clock vs the engine's, per cell")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    return fig


def _no_draft_copy(frame: pd.DataFrame) -> pd.DataFrame:
    copies = _trace_figures(frame, "copy_fraction")
    return copies[copies["spec_mode"] == NO_DRAFT] if len(copies) else copies


@draws
def trace_copy_fraction(figures: pd.DataFrame):
    copies = _no_draft_copy(_frame(figures))
    if copies.empty:
        return "no request trace in this run (traces is empty)"
    mix_axes = [axis for axis in MIX_AXES if axis in copies]
    fig, axis = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
    bins = [i / 10 for i in range(11)]
    for n, (_key, rows) in enumerate(copies.groupby(mix_axes, sort=False, dropna=False)):
        first = rows.iloc[0]
        label = f"{first['trace']} · {first['model']} · {first['protocol']}"
        if rows["engine"].nunique() == 1 and copies["engine"].nunique() > 1:
            label += f" · {first['engine']}"
        axis.hist(rows["value"], bins=bins, histtype="step", linewidth=1.6, color=_COLOURS[n % len(_COLOURS)],
                  linestyle=_LINES[n % len(_LINES)], label=label)  # fmt: skip
    axis.set_xlabel(
        "copy fraction of a request's output (no drafting; share in ≥ 8-token spans of its prompt)"
    )
    axis.set_ylabel("requests")
    axis.set_title("How much of each request's output copies its input?")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    return fig


@draws
def trace_speedup_vs_copy(figures: pd.DataFrame):
    frame = _frame(figures)
    copy_of = _no_draft_copy(frame)
    speedups = _trace_figures(frame, "speedup_vs_none")
    if copy_of.empty or speedups.empty:
        return "no request trace with a speculative mode and its no-draft baseline in this run"
    copy_of = copy_of.set_index("cell_id")["value"]  # a speed-up's baseline is its no-draft cell
    speedups = speedups[speedups["baseline_cell_id"].isin(copy_of.index)]
    fig, axis = plt.subplots(figsize=(7.5, 5.0), constrained_layout=True)
    for n, mode in enumerate(_modes_in_order(speedups["spec_mode"])):
        for kind, filled in (("real", True), ("synthetic", False)):
            rows = speedups[(speedups["spec_mode"] == mode) & (speedups["text_kind"] == kind)]
            if rows.empty:
                continue
            colour = _COLOURS[n % len(_COLOURS)]
            xs = copy_of.loc[rows["baseline_cell_id"]].to_numpy() * 100
            axis.scatter(xs, rows["value"], marker=_MARKERS[n % len(_MARKERS)], s=40, edgecolors=colour,
                         facecolors=colour if filled else "none", label=f"{mode}, {kind} text")  # fmt: skip
            _strike_gated(axis, xs, rows)
    _speedup_against_copy_axes(
        axis,
        "copy fraction of the request's output without drafting (%)",
        "Each request of your trace: speed-up against how much it copies",
    )
    return fig


def draw_plots(figures: pd.DataFrame, plot_dir: Path) -> list[Plot]:
    """Every plot of the report (plot_list), each also written to plot_dir/<name>.png."""
    plots = []
    for entry in PLOTS:
        drawn = DRAW[entry.name](figures)
        if isinstance(drawn, str):
            png, reason = _placeholder(entry.title, drawn), drawn
            plots.append(Plot(entry.name, entry.title, entry.caption, None, reason, entry.wide))
        else:
            png = _png(drawn)
            plots.append(Plot(entry.name, entry.title, entry.caption, png, wide=entry.wide))
        plot_dir.mkdir(parents=True, exist_ok=True)
        (plot_dir / f"{entry.name}.png").write_bytes(png)
    return plots


def _placeholder(title: str, reason: str) -> bytes:
    fig = plt.figure(figsize=(6, 0.9))
    fig.text(0.5, 0.5, f"{title}: no data in this run ({reason})", ha="center", va="center", fontsize=8)
    return _png(fig)


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
