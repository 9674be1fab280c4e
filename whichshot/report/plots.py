"""Matplotlib figures for the report; greyscale-safe (markers and line styles, not only colour)."""

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

_STYLES = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", "-"), ("P", "--")]


def tok_s_by_shot_index(shots: pd.DataFrame, path: Path) -> bytes:
    """Decode and prefill tok/s against shot index: cold shots (index 1 of fresh processes) vs warm."""
    ok = shots[shots["status"] == "ok"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, metric, label in ((axes[0], "prefill_tok_s", "prefill"),
                                (axes[1], "decode_tok_s", "decode")):  # fmt: skip
        _plot_metric(axis, ok, metric)
        axis.set_xlabel("shot index (1 = first shot of a process)")
        axis.set_ylabel(f"{label} speed, client-timed (tok/s)")
        axis.set_title(f"{label.capitalize()} speed by shot position")
        axis.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)),
                   fontsize=8, frameon=False)  # fmt: skip
    return _save(fig, path)


def _plot_metric(axis, ok: pd.DataFrame, metric: str) -> None:
    keys = ["engine", "model", "prompt_tokens"]
    for n, (key, group) in enumerate(ok.groupby(keys, sort=True)):
        marker, line = _STYLES[n % len(_STYLES)]
        label = f"{key[1]} p{key[2]}"
        colour = f"C{n % 10}"
        warm = group[group["protocol"] == "warm"].groupby("shot_index")[metric].median()
        axis.plot(warm.index, warm.values, marker=marker, linestyle=line, color=colour,
                  label=f"{label} warm")  # fmt: skip
        cold = group[(group["protocol"] == "cold") & (group["shot_index"] == 1)][metric]
        axis.scatter([0.85] * len(cold), cold, marker=marker, facecolors="none",
                     edgecolors=colour, label=f"{label} cold (each a fresh process)")  # fmt: skip


def _save(fig, path: Path) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data
