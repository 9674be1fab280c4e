"""A peer's client beside ours: llama-benchy's TTFT and decode speed against a server started as a warm
series' was, right after it (whichshot.measure.peer), per cell, and our warm figure over its mean."""

from dataclasses import dataclass, field
from typing import Any

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import group_cells

PEER = "llama-benchy"
# its figure -> (its values in the record's parsed numbers, our warm figure, the ratio's metric, unit)
PEER_METRICS = {
    "peer_ttft_s": ("e2e_ttft_s", "ttft_s", "ttft_vs_peer_ratio", "s"),
    "peer_decode_tok_s": ("decode_tok_s", "decode_tok_s", "decode_vs_peer_ratio", "tok/s"),
}
DEFINITIONS = {
    "peer_ttft_s": "its e2e_ttft: request sent to the first stream chunk with content, over HTTP to "
    "/v1/chat/completions",
    "peer_decode_tok_s": "its tg t/s: tokens after the first content chunk over the time from it to the last",
}


@dataclass
class PeerRuns:
    """A cell's peer runs: every run's values by name, and where they came from."""

    values: dict[str, list[float]] = field(default_factory=dict)
    source_ids: list[str] = field(default_factory=list)
    work: list[str] = field(default_factory=list)
    asked: int = 0  # runs asked for over the cell's series (a run the tool lost has no values)


def source_id(job_id: str) -> str:
    return f"{PEER}:results/bench/{job_id}.json#peer_client"


def missing_because(run: dict[str, Any]) -> str | None:
    """Why a series the peer was set against has no numbers from it (None: it has them)."""
    peer = run["peer_client"]
    done = peer["run"] or {}
    if done.get("parsed") is not None:
        return None
    return peer["not_run"] or done.get("error") or "no result"


def peers_missing(runs: list[dict[str, Any]]) -> dict[str, str]:
    """Source id -> why, for every series the peer was set against and gave no numbers for."""
    applies = [r for r in runs if (r.get("peer_client") or {}).get("applies")]
    return {source_id(r["job_id"]): why for r in applies if (why := missing_because(r))}


def cell_peer_runs(runs: list[dict[str, Any]]) -> PeerRuns | None:
    """The peer's runs of a cell's series (None: the peer was not set against any of them)."""
    applies = [r for r in runs if (r.get("peer_client") or {}).get("applies")]
    if not applies:
        return None
    pooled = PeerRuns()
    for run in applies:
        pooled.source_ids.append(source_id(run["job_id"]))
        pooled.asked += (run["peer_client"]["work"] or {}).get("runs", 0)
        if missing_because(run):
            continue
        done = run["peer_client"]["run"]["parsed"]
        for name in ("e2e_ttft_s", "decode_tok_s"):
            pooled.values.setdefault(name, []).extend(done[name])
        pooled.work.append(f"pp{done['prompt_tokens']} tg{done['output_tokens']} ({PEER} {done['version']})")
    return pooled


def peer_figures(catalog: Catalog) -> list[figure.Figure]:
    """Per cell: the peer's mean TTFT and decode speed over its runs (none when it did not run:
    not measured, and the caveat says why), and our warm figure over its mean."""
    figures = []
    for cell, rows in group_cells(catalog.shots):
        runs = [r for r in catalog.bench_runs if r.get("job_id") in set(rows["job_id"])]
        pooled = cell_peer_runs(runs)
        if pooled is None:
            continue
        work = ", ".join(dict.fromkeys(pooled.work)) or "not run"
        for metric, (name, ours_metric, ratio_metric, unit) in PEER_METRICS.items():
            samples = pooled.values.get(name, [])
            peer = figure.from_source(
                metric,
                "tool_samples_mean",
                {"samples": samples},
                pooled.source_ids,
                unit,
                cell=cell,
                formula=f"{PEER} {work}: mean of {len(samples)} run(s) of {pooled.asked} asked, of "
                f"{DEFINITIONS[metric]}",
                computed_by=peer_figures,
                timed_by=PEER,
                which_shot=f"{PEER}'s own protocol (its warm-up run, then its runs) against a fresh server "
                "started as the series' was, right after the series",
            )
            figures.append(peer)
            ours = catalog.find(cell, ours_metric)
            if peer.value is None or ours is None or ours.value is None:
                continue
            figures.append(
                figure.from_figures(
                    ratio_metric,
                    [ours, peer],
                    "ratio",
                    unit="ratio",
                    computed_by=peer_figures,
                    formula=f"our warm {ours_metric} / {PEER}'s mean {metric} ({work})",
                )
            )
    return figures
