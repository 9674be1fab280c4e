"""The report's plots, listed once, in page order: each one's name (its PNG results/report/<name>.png,
its caption captions/<name>.rst, the function of plots.py that draws it), title and width.
workflow/rules/report.smk declares each as a report() output with its caption, index.html.j2 lays
them out, and plots.draw_plots draws them. It imports nothing heavy: the workflow reads it as it loads."""

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class PlotEntry:
    name: str
    title: str
    wide: bool = True  # spans the page's width; a narrow plot shares its row with the next

    @property
    def caption(self) -> str:
        """The caption (captions/<name>.rst, also snakemake --report's) as one line."""
        text = resources.files("whichshot.report").joinpath("captions", f"{self.name}.rst").read_text()
        return " ".join(text.split())


PLOTS = (
    PlotEntry("tok_s_by_shot_index", "Speed by shot index, with the clock"),
    PlotEntry("rest_effect", "Effect of the rest before each warm shot"),
    PlotEntry("clock_ratio", "Predicted vs measured warm speed (clock ratio)", wide=False),
    PlotEntry("workload_modes", "Workloads × speculative modes"),
    PlotEntry("copy_vs_speedup", "Copy fraction vs speed-up", wide=False),
    PlotEntry("acceptance_real_synthetic", "Acceptance on real vs synthetic text", wide=False),
    PlotEntry("ngram_warm_series", "Drafting state across a warm series"),
    PlotEntry("client_vs_engine", "Client vs engine timing"),
    PlotEntry("trace_copy_fraction", "Copy fraction over your trace's requests"),
    PlotEntry("trace_speedup_vs_copy", "Speed-up per request against its copy fraction"),
)
PLOT_NAMES = tuple(entry.name for entry in PLOTS)
