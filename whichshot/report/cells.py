"""Every cell of the report's tables, rendered once into a neutral form: the words shown and, for a
figure, its provenance kind, caveat numbers, figure id and formula on hover. index.html.j2 and
summary.py only format these (HTML, Markdown); the gated speed-up, lossless, checks, energy and
which-shot cells are written here and nowhere else."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from whichshot.figures.caveats.gates import Gate, gate_label, gate_words, struck_by
from whichshot.figures.caveats.telemetry_rules import ENERGY_UNSTABLE
from whichshot.figures.metrics import CHECKS
from whichshot.report.format import NOT_MEASURED, format_bare

NOT_APPLICABLE = "—"
STRUCK_MARK = "✗"
# Cell-id parts that say nothing in a short label: the defaults of the grid's axes.
_QUIET_PARTS = {"continue_text", "real", "rest0s", "pre0s", "same", "none", "engine_default"}


@dataclass(frozen=True)
class Part:
    """Words of a cell, or one figure's value (then with its kind, caveats and id)."""

    text: str
    kind: str = ""  # a figure's provenance kind; '' for words
    caveats: tuple[tuple[str, int], ...] = ()  # (caveat id, number) of the caveats not said run-wide
    figure_id: str = ""
    hover: str = ""
    # How index.html sets words apart: 'check' (its name), 'gate', 'verdict', 'code', 'bold', or 'id'
    # (a short cell label whose full id is on hover: an aid of the HTML page, left out of Markdown).
    look: str = ""


@dataclass(frozen=True)
class Cell:
    """A table cell: lines of parts (one line but in the checks cell), and how it reads."""

    lines: tuple[tuple[Part, ...], ...] = ()
    numeric: bool = False
    missing: bool = False  # in place of a figure: '—' (does not apply) or 'not measured'
    struck: tuple[Gate, ...] = ()  # the gates that strike its value: never a win
    hover: str = ""
    look: str = ""  # 'which' (which-shot words), 'series' (a series' axes in words)
    repeated: bool = False  # repeats its group's value in the row above (index.html fades it)


def words(text: Any, hover: str = "", look: str = "", cell_look: str = "", numeric: bool = False) -> Cell:
    """Plain words (a cell's axis value, say)."""
    return Cell(((Part(str(text), hover=hover, look=look),),), numeric=numeric, look=cell_look)


def absent(text: str = NOT_APPLICABLE, hover: str = "") -> Cell:
    return Cell(((Part(text),),), numeric=True, missing=True, hover=hover)


def short_cell(cell_id: str | None) -> str:
    """A cell's short label ('p256 · warm'): its id without engine, model, context and default axes
    (the full id goes on hover)."""
    parts = (cell_id or "").split("/")[2:]
    shown = [p for p in parts if p and p not in _QUIET_PARTS and not p.startswith("ctx")]
    return " · ".join(shown) or (cell_id or "")


def which_shot(row: dict[str, Any], with_id: bool = False) -> Cell:
    """The row's which-shot words; with_id, its cell's short label too (the full id on hover)."""
    parts = [Part(row["which_shot"])]
    if with_id:
        parts.append(Part(short_cell(row["cell_id"]), hover=f"{row['cell_id']}/<metric>", look="id"))
    return Cell((tuple(parts),), look="which")


class CellWriter:
    """The cells of one report: each figure carries the numbers of its caveats (those said once for
    the whole run left out)."""

    def __init__(self, caveat_numbers: dict[str, int]) -> None:
        self.caveat_numbers = caveat_numbers

    def value(self, figure: dict[str, Any], text: str | None = None) -> Part:
        """A figure's value (format_bare unless told), with its kind, caveats, id and formula."""
        numbered = [c for c in figure["caveat_ids"] if c in self.caveat_numbers]
        return Part(
            format_bare(figure) if text is None else text,
            kind=figure["kind"],
            caveats=tuple((c, self.caveat_numbers[c]) for c in numbered),
            figure_id=figure["figure_id"],
            hover=f"{figure['figure_id']}: {figure['formula']} ({figure['computed_by']})",
        )

    def metric(
        self,
        metric: str,
        figure: dict[str, Any] | None,
        missing: str = NOT_APPLICABLE,
        text: Callable[[dict[str, Any]], str] = format_bare,
    ) -> Cell:
        """A figure of a metric column: an energy per token with its verdict, a figure a gate strikes
        (a speed-up whose task or output was not checked or failed, a prefill read from the cache) set
        apart, else the value; `missing` where the row has no such figure."""
        if metric in ENERGY_UNSTABLE:
            return self.energy(figure)
        if figure is None:
            return absent(missing)
        gates = struck_by(figure)
        if gates:
            return self.struck(figure, gates)
        return Cell(((self.value(figure, text(figure)),),), numeric=True)

    def struck(self, figure: dict[str, Any], gates: list[Gate]) -> Cell:
        """A figure a gate strikes (caveats.gates.struck_by): ✗, the value struck, the gate's label;
        why on hover."""
        mark, label = Part(STRUCK_MARK), Part(gate_label(gates), look="gate")
        return Cell(((mark, self.value(figure), label),), numeric=True, struck=tuple(gates),
                    hover=f"{gate_words(gates)}: not a valid figure")  # fmt: skip

    def energy(self, figure: dict[str, Any] | None) -> Cell:
        """An energy per token with its verdict: never a number without a counter."""
        if figure is None or figure["value"] is None:
            return absent(NOT_MEASURED, hover=figure["note"] if figure else "")
        verdict = Part(energy_words(figure), hover=figure["note"], look="verdict")
        return Cell(((self.value(figure), verdict),), numeric=True)

    def checks(self, row: dict[str, Any]) -> Cell:
        """A workload row's checks, one line each: the check's name (its meaning on hover) and its
        shots passing out of all."""
        lines = []
        for metric, name, meaning in CHECKS:
            figure = row["cells"].get(metric)
            if figure is None or figure["value"] is None:
                continue
            n = len(figure["shot_ids"])
            passing = f"{round(figure['value'] * n)}/{n}"
            lines.append((Part(name, hover=meaning, look="check"), self.value(figure, passing)))
        return Cell(tuple(lines), numeric=True) if lines else absent()


def energy_words(figure: dict[str, Any]) -> str:
    """An energy-per-token figure's verdict in words: 'unstable' where its stability caveat fired,
    else 'stable'; 'from a back-to-back series of K shots' where it used one (the figure's note says
    what the verdict rests on)."""
    word = "unstable" if ENERGY_UNSTABLE[figure["metric"]] in figure["caveat_ids"] else "stable"
    if "back-to-back series" in figure["which_shot"]:
        word += f", from a back-to-back series of {len(figure['shot_ids'])} shots"
    return word
