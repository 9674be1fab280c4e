"""Matplotlib figures for the report. Readable in greyscale: every series differs by marker, line
style or hatch, not only by colour. A plot without data in this run is not drawn; its file then
holds one line saying so (Snakemake's report needs every declared file)."""

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({"axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8})
import pandas as pd  # noqa: E402

from whichshot.crosscheck import CLIENT_ENGINE_TOLERANCE  # noqa: E402
from whichshot.lossless import NO_DRAFT  # noqa: E402
from whichshot.power import CLOCK_ONLY_TOLERANCE, cold_sibling_label  # noqa: E402

# Okabe-Ito (colour-blind safe); greyscale safety comes from the markers, lines and hatches.
_COLOURS = ("#000000", "#E69F00", "#0072B2", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINES = ("-", "--", ":", "-.")
_HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
_FILLS = ("#404040", "#f0f0f0", "#a0a0a0", "#ffffff", "#707070", "#d0d0d0", "#202020", "#c0c0c0")
BASE_WORKLOAD = "continue_text"


@dataclass
class Plot:
    """One drawn (or skipped) plot of the report."""

    name: str
    title: str
    caption: str
    png: bytes | None
    reason: str = ""


@dataclass(frozen=True)
class PlotSpec:
    name: str
    title: str
    caption: str
    draw: Callable[[pd.DataFrame, pd.DataFrame], "plt.Figure | str"]


def _style(n: int) -> dict:
    return {"color": _COLOURS[n % len(_COLOURS)], "marker": _MARKERS[n % len(_MARKERS)],
            "linestyle": _LINES[n % len(_LINES)]}  # fmt: skip


def _ok(shots: pd.DataFrame) -> pd.DataFrame:
    return shots[shots["status"] == "ok"]


def _base_shots(shots: pd.DataFrame) -> pd.DataFrame:
    ok = _ok(shots)
    return ok[ok["workload"] == BASE_WORKLOAD] if "workload" in ok else ok


def _workload_shots(shots: pd.DataFrame) -> pd.DataFrame:
    ok = _ok(shots)
    return ok[ok["workload"] != BASE_WORKLOAD] if "workload" in ok else ok.iloc[0:0]


def _modes_in_order(modes) -> list[str]:
    """The no-draft mode first, then the others in the order they appear."""
    seen = list(dict.fromkeys(modes))
    return sorted(seen, key=lambda m: (m != NO_DRAFT, seen.index(m)))


def _clock_column(shots: pd.DataFrame) -> tuple[str, str] | None:
    for column, label in (("sm_clock_median_mhz", "GPU SM clock"), ("cpu_freq_median_mhz", "CPU clock")):
        if column in shots and shots[column].notna().any():
            return column, label
    return None


# --- tok/s by shot index, clock on a second axis -------------------------------------------------


def tok_s_by_shot_index(shots: pd.DataFrame, figures: pd.DataFrame):
    ok = _base_shots(shots)
    if ok.empty:
        return "no protocol-grid shots in this run"
    clock = _clock_column(ok)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    for axis, metric, label in ((axes[0], "prefill_tok_s", "prefill"), (axes[1], "decode_tok_s", "decode")):
        _speed_by_index(axis, ok, metric, clock)
        axis.set_xlabel("shot index (1 = first shot a process served)")
        axis.set_ylabel(f"{label} speed, client-timed (tok/s)")
        axis.set_title(f"{label.capitalize()} speed by shot index")
        axis.grid(alpha=0.3)
    _legend_below(fig, axes)
    return fig


def _speed_by_index(axis, ok: pd.DataFrame, metric: str, clock: tuple[str, str] | None) -> None:
    """One colour and marker per engine/model/length; one line per warm cell (line style per rest)."""
    colours = {key: n for n, key in enumerate(dict.fromkeys(map(_cell_key, ok.to_dict("records"))))}
    twin = axis.twinx() if clock else None
    for key, cold in ok[(ok["protocol"] == "cold") & (ok["shot_index"] == 1)].groupby(_CELL, sort=False):
        style, label = _style(colours[key]), f"{key[1]} p{key[2]} cold (fresh processes)"
        axis.scatter([0.8] * len(cold), cold[metric], marker=style["marker"], facecolors="none",
                     edgecolors=style["color"], label=label)  # fmt: skip
    for m, (_label, warm) in enumerate(ok[ok["protocol"] == "warm"].groupby("series_label", sort=False)):
        first = warm.iloc[0]
        style = {**_style(colours[_cell_key(first)]), "linestyle": _LINES[m % len(_LINES)]}
        label = f"{first['model']} p{first['prompt_tokens']} warm, {first['rest_s']:g} s rest"
        by_index = warm.groupby("shot_index")[metric].median()
        axis.plot(by_index.index, by_index.values, **style, label=label)
        if twin is not None:
            clocks = warm.groupby("shot_index")[clock[0]].median()
            twin.plot(clocks.index, clocks.values, color=style["color"], linestyle=":", marker="x",
                      linewidth=1, alpha=0.7)  # fmt: skip
    if twin is not None:
        _clock_axis(twin, ok[clock[0]], clock[1])
    else:
        axis.text(0.99, 0.02, "clock not measured", transform=axis.transAxes, ha="right", fontsize=8)
    axis.set_xlim(left=0.5)


_CELL = ["engine", "model", "prompt_tokens"]


def _cell_key(row) -> tuple:
    return tuple(row[column] for column in _CELL)


def _clock_axis(twin, clocks: pd.Series, name: str) -> None:
    """Clock axis from 80 % of the top clock: a 0.5 % wobble must not look like a cliff."""
    top = clocks.max()
    twin.set_ylim(min(clocks.min(), 0.8 * top) * 0.98, top * 1.02)
    twin.set_ylabel(f"{name}, median over the shot (MHz; dotted, ×)")


def _legend_below(fig, axes) -> None:
    handles, labels = axes[-1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8,
                   frameon=False)  # fmt: skip


# --- rest before each warm shot ------------------------------------------------------------------


_REST = re.compile(r"rest[0-9p]+s")


def rest_effect(shots: pd.DataFrame, figures: pd.DataFrame):
    warm = _rest_cells(figures)
    if warm.empty or warm.groupby("cell")["rest_s"].nunique().max() < 2:
        return "only one rest interval in this run (config/full.yaml has the seed's 0/3/15/45 s)"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, metric in zip(axes, ("prefill_tok_s", "decode_tok_s"), strict=True):
        _rest_lines(axis, figures, warm[warm["metric"] == metric])
        axis.set_xlabel("rest before each warm shot (s)")
        axis.set_ylabel(f"warm {metric.split('_')[0]} speed (tok/s)")
        axis.set_title(f"Warm {metric.split('_')[0]} speed by rest interval")
        axis.grid(alpha=0.3)
    _legend_below(fig, axes)
    return fig


def _rest_cells(figures: pd.DataFrame) -> pd.DataFrame:
    """Warm speed figures of the protocol grid, each with its cell label minus the rest."""
    warm = _base_figures(figures)
    warm = warm[(warm["protocol"] == "warm") & warm["metric"].isin(["prefill_tok_s", "decode_tok_s"])]
    return warm.assign(cell=warm["series_label"].str.replace(_REST, "rest*", regex=True))


def _rest_lines(axis, figures: pd.DataFrame, cells: pd.DataFrame) -> None:
    values = figures.set_index("figure_id")["value"]
    for n, (cell, group) in enumerate(cells.groupby("cell", sort=False)):
        group = group.sort_values("rest_s")
        style, label = _style(n), ".".join(cell.split(".")[1:3])
        axis.plot(group["rest_s"], group["value"], **style, label=f"{label} warm")
        cold_id = "/".join([*(cold_sibling_label(group["series_label"].iloc[0]) or "").split("."),
                            group["metric"].iloc[0]])  # fmt: skip
        if cold_id in values.index:
            axis.axhline(values[cold_id], color=style["color"], linestyle=":", linewidth=1,
                         label=f"{label} cold (shot 1, fresh process)")  # fmt: skip


def _base_figures(figures: pd.DataFrame) -> pd.DataFrame:
    if "workload" not in figures:
        return figures
    return figures[figures["workload"].isin(["", BASE_WORKLOAD])]


# --- predicted vs measured warm (clock ratio) ----------------------------------------------------


def clock_ratio(shots: pd.DataFrame, figures: pd.DataFrame):
    predicted = figures[figures["metric"].str.endswith("_clock_predicted")]
    if predicted.empty:
        return "no cold/warm pair with clock readings in this run"
    measured = figures.set_index("figure_id")["value"]
    fig, axis = plt.subplots(figsize=(6.4, 4.6), constrained_layout=True)
    for n, metric in enumerate(("prefill_tok_s", "decode_tok_s")):
        rows = predicted[predicted["metric"] == f"{metric}_clock_predicted"]
        ids = rows["figure_id"].str.replace("_clock_predicted", "_warm_measured")
        keep = ids.isin(measured.index)
        xs, ys = rows["value"][keep].to_numpy(), measured[ids[keep]].to_numpy()
        label = f"{metric.split('_')[0]} (one point per warm cell)"
        axis.scatter(xs, (ys / xs - 1) * 100, marker=_MARKERS[n], facecolors="none" if n else _COLOURS[0],
                     edgecolors=_COLOURS[0], label=label)  # fmt: skip
    axis.axhline(0, color="#333333", linewidth=0.8, label="measured = predicted")
    band = f"±{CLOCK_ONLY_TOLERANCE:.0%}: only the clock changed"
    for sign in (-1, 1):
        axis.axhline(sign * CLOCK_ONLY_TOLERANCE * 100, color="#777777", linestyle="--", linewidth=1,
                     label=band if sign > 0 else None)  # fmt: skip
    axis.set_xscale("log")
    axis.set_xlabel("predicted warm speed = cold × f_warm / f_cold (tok/s, log scale)")
    axis.set_ylabel("measured warm / predicted − 1 (%)")
    axis.set_title("Warm speed: measured against the clock-ratio prediction")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return fig


# --- workloads x speculative modes --------------------------------------------------------------


def _workload_figures(figures: pd.DataFrame, metric: str) -> pd.DataFrame:
    if "workload" not in figures:
        return figures.iloc[0:0]
    rows = figures[(figures["metric"] == metric) & ~figures["workload"].isin(["", BASE_WORKLOAD])]
    return rows[rows["protocol"].isin(["cold", "warm"])]


def workload_modes(shots: pd.DataFrame, figures: pd.DataFrame):
    speeds = _workload_figures(figures, "decode_tok_s")
    if speeds.empty:
        return "no workload runs in this run (workloads.names is empty)"
    # One panel per engine and model: two engines must not share one bar.
    panels = list(dict.fromkeys(zip(speeds["engine"], speeds["model"], strict=True)))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.8 * len(panels)), squeeze=False,
                             constrained_layout=True)  # fmt: skip
    speedups = _workload_figures(figures, "speedup_vs_none").set_index("series_label")["value"]
    for axis, (engine, model) in zip(axes[:, 0], panels, strict=True):
        _mode_bars(axis, speeds[(speeds["engine"] == engine) & (speeds["model"] == model)], speedups)
        axis.set_title(f"{engine}, {model}: decode speed by workload and mode (× = speed-up over none)")
        axis.set_ylabel("decode speed, client-timed (tok/s)")
        axis.grid(axis="y", alpha=0.3)
    return fig


def _mode_bars(axis, speeds: pd.DataFrame, speedups: pd.Series) -> None:
    modes = _modes_in_order(speeds["spec_mode"])
    groups = list(
        dict.fromkeys(zip(speeds["workload"], speeds["text_kind"], speeds["protocol"], strict=True))
    )
    width = 0.8 / len(modes)
    for m, mode in enumerate(modes):
        rows = speeds[speeds["spec_mode"] == mode].set_index(["workload", "text_kind", "protocol"])
        present = [(g, rows.loc[group]) for g, group in enumerate(groups) if group in rows.index]
        for i, (g, row) in enumerate(present):
            x = g + (m - (len(modes) - 1) / 2) * width
            axis.bar(x, row["value"], width, color=_FILLS[m % len(_FILLS)], hatch=_HATCHES[m % len(_HATCHES)],
                     edgecolor="black", linewidth=0.6, label=mode if i == 0 else None)  # fmt: skip
            if row["series_label"] in speedups.index:
                axis.text(x, row["value"], f"×{speedups[row['series_label']]:.2f}", ha="center",
                          va="bottom", fontsize=7)  # fmt: skip
    axis.set_xticks(range(len(groups)), [f"{w}\n{k} · {p}" for w, k, p in groups], fontsize=8)
    axis.legend(title="speculative mode", fontsize=8, title_fontsize=8)


def copy_vs_speedup(shots: pd.DataFrame, figures: pd.DataFrame):
    speedups = _workload_figures(figures, "speedup_vs_none")
    copies = _workload_figures(figures, "copy_fraction").set_index("series_label")["value"]
    speedups = speedups[speedups["series_label"].isin(copies.index)]
    if speedups.empty:
        return "no speculative mode with a no-draft baseline in this run"
    fig, axis = plt.subplots(figsize=(7.5, 5.2), constrained_layout=True)
    modes = _modes_in_order(speedups["spec_mode"])
    for n, mode in enumerate(modes):
        for kind, filled in (("real", True), ("synthetic", False)):
            rows = speedups[(speedups["spec_mode"] == mode) & (speedups["text_kind"] == kind)]
            if rows.empty:
                continue
            colour, xs = _COLOURS[n % len(_COLOURS)], copies[rows["series_label"]].to_numpy() * 100
            axis.scatter(xs, rows["value"], marker=_MARKERS[n % len(_MARKERS)], s=46, edgecolors=colour,
                         facecolors=colour if filled else "none", label=f"{mode}, {kind} text")  # fmt: skip
            for x, (_, row) in zip(xs, rows.iterrows(), strict=True):
                axis.annotate(f"{row['workload']} ({row['protocol']})", (x, row["value"]), fontsize=6,
                              xytext=(4, 2), textcoords="offset points")  # fmt: skip
    axis.axhline(1.0, color="#555555", linewidth=1, linestyle="--", label="no speed-up")
    axis.set_xlabel("copy fraction of the drafted output (% of output tokens in ≥ k-token prompt spans)")
    axis.set_ylabel("speed-up over no drafting (×, decode tok/s ratio)")
    axis.set_title("Does copying predict the speed-up?")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    return fig


def acceptance_real_synthetic(shots: pd.DataFrame, figures: pd.DataFrame):
    rates = _workload_figures(figures, "acceptance_rate")
    if rates.empty:
        return "no drafted tokens in this run"
    groups = list(dict.fromkeys(zip(rates["model"], rates["workload"], rates["spec_mode"], rates["protocol"],
                                    strict=True)))  # fmt: skip
    fig, axis = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4.4), constrained_layout=True)
    indexed = rates.set_index(["model", "workload", "spec_mode", "protocol", "text_kind"])["value"]
    for k, kind in enumerate(("real", "synthetic")):
        xs = [g + (k - 0.5) * 0.38 for g, group in enumerate(groups) if (*group, kind) in indexed.index]
        ys = [indexed[(*group, kind)] * 100 for group in groups if (*group, kind) in indexed.index]
        axis.bar(xs, ys, 0.38, color=_FILLS[k * 2], hatch=_HATCHES[k], edgecolor="black", linewidth=0.6,
                 label=f"{kind} text")  # fmt: skip
    axis.set_xticks(range(len(groups)), [f"{w}\n{m} · {mode} · {p}" for m, w, mode, p in groups], fontsize=7)
    axis.set_ylabel("acceptance (accepted / drafted tokens, %)")
    axis.set_ylim(0, 105)
    axis.set_title("Draft acceptance on real vs synthetic text (engine-reported counts)")
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    return fig


def ngram_warm_series(shots: pd.DataFrame, figures: pd.DataFrame):
    warm = _workload_shots(shots)
    warm = warm[warm["protocol"] == "warm"]
    if warm.empty or warm["shot_index"].max() < 2:
        return "no warm workload series in this run"
    panels = list(dict.fromkeys(zip(warm["model"], warm["workload"], warm["text_kind"], strict=True)))
    columns = min(4, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.9 * columns + 0.6, 2.5 * rows + 0.8), squeeze=False,
                             constrained_layout=True)  # fmt: skip
    modes = _modes_in_order(warm["spec_mode"])
    for axis, (model, workload, kind) in zip(axes.flat, panels, strict=False):
        cell = warm[(warm["model"] == model) & (warm["workload"] == workload) & (warm["text_kind"] == kind)]
        for n, mode in enumerate(modes):
            series = cell[cell["spec_mode"] == mode].groupby("shot_index")["decode_tok_s"].median()
            if not series.empty:
                axis.plot(series.index, series.values, **_style(n), label=mode)
        axis.set_title(f"{model}\n{workload}, {kind} text", fontsize=8)
        axis.set_xlabel("shot index in the process", fontsize=8)
        axis.set_ylabel("decode tok/s", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False,
               title="speculative mode", title_fontsize=8)  # fmt: skip
    return fig


def client_vs_engine(shots: pd.DataFrame, figures: pd.DataFrame):
    ok = _ok(shots)
    pairs = (
        ("decode_tok_s", "engine_decode_tok_s", "decode"),
        ("prefill_tok_s", "engine_prefill_tok_s", "prefill"),
    )
    if ok.dropna(subset=["decode_tok_s", "engine_decode_tok_s"]).empty:
        return "no shot with both client and engine timings in this run"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, (ours, theirs, label) in zip(axes, pairs, strict=True):
        both = ok.dropna(subset=[ours, theirs])
        for n, protocol in enumerate(("cold", "warm")):
            rows = both[both["protocol"] == protocol]
            axis.scatter(rows[theirs], (rows[ours] / rows[theirs] - 1) * 100, marker=_MARKERS[n], s=22,
                         facecolors="none" if n == 0 else _COLOURS[0], edgecolors=_COLOURS[0],
                         label=f"{protocol} shots")  # fmt: skip
        for sign in (-1, 1):
            axis.axhline(sign * CLIENT_ENGINE_TOLERANCE * 100, color="#777777", linestyle="--", linewidth=1,
                         label=f"±{CLIENT_ENGINE_TOLERANCE:.0%}" if sign > 0 else None)  # fmt: skip
        axis.axhline(0, color="#333333", linewidth=0.8)
        axis.set_xlabel(f"engine-reported {label} speed (tok/s)")
        axis.set_ylabel(f"client / engine {label} speed − 1 (%)")
        axis.set_title(f"{label.capitalize()}: our clock vs the engine's, per shot")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    return fig


PLOTS = (
    PlotSpec("tok_s_by_shot_index", "Speed by shot index, with the clock",
             "Prefill and decode speed (client-timed) against shot index for the protocol grid; open "
             "markers left of 1 are cold shots (shot 1 of fresh processes), lines the median per index "
             "of the warm series; dotted lines with × are the clock on the right axis.",
             tok_s_by_shot_index),
    PlotSpec("rest_effect", "Effect of the rest before each warm shot",
             "Warm-rule figures (decode_tok_s / prefill_tok_s rows of figures.parquet) against the rest "
             "interval; dotted horizontal lines are the cold figure of the same cell.", rest_effect),
    PlotSpec("clock_ratio", "Predicted vs measured warm speed (clock ratio)",
             "Each point is a warm cell: x = cold × f_warm / f_cold (an inferred figure), y = how far the "
             "measured warm figure lies from it. Inside the dashed band only the clock changed.",
             clock_ratio),
    PlotSpec("workload_modes", "Workloads × speculative modes",
             "Decode speed (the cell's cold or warm figure) per workload, text and protocol; one bar "
             "per speculative mode (hatch), labelled with its speed-up over no drafting.", workload_modes),
    PlotSpec("copy_vs_speedup", "Copy fraction vs speed-up",
             "Each point is a drafted workload cell: how much of its output copies the prompt against "
             "its speed-up over no drafting; filled markers real text, open markers synthetic filler.",
             copy_vs_speedup),
    PlotSpec("acceptance_real_synthetic", "Acceptance on real vs synthetic text",
             "Accepted / drafted tokens (engine-reported counts) per drafted cell, real text (solid) "
             "beside synthetic filler (hatched).", acceptance_real_synthetic),
    PlotSpec("ngram_warm_series", "Drafting state across a warm series",
             "Decode speed by shot index in the warm workload series, one line per speculative mode: "
             "n-gram state that persists across requests shows as speed rising shot by shot.",
             ngram_warm_series),
    PlotSpec("client_vs_engine", "Client vs engine timing",
             "Per shot: our client's speed relative to the engine's own timings; the dashed lines are "
             "the ±1 % tolerance of the client_engine_disagree caveat (prefill: our TTFT also holds "
             "HTTP and sampling of the first token).", client_vs_engine),
)  # fmt: skip
PLOT_NAMES = tuple(spec.name for spec in PLOTS)


def draw_plots(shots: pd.DataFrame, figures: pd.DataFrame, plot_dir: Path) -> list[Plot]:
    """Every plot of the report, each also written to plot_dir/<name>.png."""
    plots = []
    for spec in PLOTS:
        drawn = spec.draw(shots, figures)
        if isinstance(drawn, str):
            png, reason = _placeholder(spec.title, drawn), drawn
            plots.append(Plot(spec.name, spec.title, spec.caption, None, reason))
        else:
            png = _png(drawn)
            plots.append(Plot(spec.name, spec.title, spec.caption, png))
        plot_dir.mkdir(parents=True, exist_ok=True)
        (plot_dir / f"{spec.name}.png").write_bytes(png)
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
