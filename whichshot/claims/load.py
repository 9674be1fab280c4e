"""Claims files: read, checked against claims.schema.yaml and for sense (a unit the metric can take,
a ratio with both sides), one clear line per problem naming the file and the claim."""

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from whichshot.errors import WhichshotError
from whichshot.figures.metrics import named_metrics
from whichshot.shots.axes import AXES
from whichshot.tables import record_schema

DEFAULT_TOLERANCE = 0.05
RATIO = "ratio"
# A claim's unit -> (the figure unit it is compared in, the factor that converts it).
UNITS = {
    "tok/s": ("tok/s", 1.0),
    "s": ("s", 1.0),
    "ms": ("s", 1e-3),
    "x": ("ratio", 1.0),
    "%": ("fraction", 1e-2),
    "fraction": ("fraction", 1.0),
    "W": ("W", 1.0),
    "MHz": ("MHz", 1.0),
    "GB/s": ("B/s", 1e9),
    "GB": ("B", 1e9),
    "tokens/step": ("tokens/step", 1.0),
}


@dataclass(frozen=True)
class Claim:
    claim_id: str
    file: str
    citation: str
    quote: str
    value: float  # in the figure's unit (converted)
    unit: str  # as the claim gives it
    metric: str
    checkable: str
    why: str = ""
    where: dict[str, Any] = field(default_factory=dict)
    numerator: dict[str, Any] | None = None
    denominator: dict[str, Any] | None = None
    tolerance: float = DEFAULT_TOLERANCE
    stated: dict[str, Any] = field(default_factory=dict)
    value_as_stated: float = 0.0
    value_range: tuple[float, float] | None = None  # converted, where the claim states a range
    source_title: str = ""  # the article's title: 'English (as it has it)', where the file gives it

    @property
    def is_ratio(self) -> bool:
        return self.metric == RATIO

    def holds(self, ours: float) -> bool:
        """Our reading is the claimed number: within the tolerance of its value (absolute for a
        claimed 0), or inside the range it states."""
        if self.value_range and self.value_range[0] <= ours <= self.value_range[1]:
            return True
        off = ours - self.value if self.value == 0 else ours / self.value - 1
        return abs(off) <= self.tolerance


def claims_schema() -> dict[str, Any]:
    """claims.schema.yaml with the grid's axes as the keys a `where` may name."""
    schema = copy.deepcopy(record_schema("claims"))
    schema["$defs"]["where"]["propertyNames"] = {"enum": list(AXES)}
    return schema


def load_claims(path: Path) -> list[Claim]:
    """Every claim of a claims file, or one line saying what is wrong with it."""
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise WhichshotError(f"claims file {path}: cannot read it ({exc})") from None
    errors = sorted(
        jsonschema.Draft202012Validator(claims_schema()).iter_errors(document),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        raise WhichshotError(f"claims file {path}: {_where(document, errors[0])}: {errors[0].message}")
    title = _source_title(document)
    claims = [replace(_claim(item, str(path)), source_title=title) for item in document["claims"]]
    ids = [c.claim_id for c in claims]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise WhichshotError(f"claims file {path}: claim id {twice[0]} is given twice")
    return claims


def _source_title(document: dict[str, Any]) -> str:
    """'English title (title as the article has it)', either alone where only one is given."""
    title, english = document.get("title", ""), document.get("title_en", "")
    return f"{english} ({title})" if title and english else title or english


def _where(document: Any, error: jsonschema.ValidationError) -> str:
    parts = list(error.absolute_path)
    if len(parts) >= 2 and parts[0] == "claims" and isinstance(document, dict):
        item = document["claims"][parts[1]]
        name = item.get("id", f"#{parts[1] + 1}") if isinstance(item, dict) else f"#{parts[1] + 1}"
        rest = ".".join(str(p) for p in parts[2:])
        return f"claim {name}" + (f" field {rest}" if rest else "")
    return ".".join(str(p) for p in parts) or "top level"


def _metrics_named(item: dict[str, Any]) -> list[str]:
    if item["metric"] == RATIO:
        return [side["metric"] for side in (item.get("numerator"), item.get("denominator")) if side]
    return [item["metric"]]


def _claim(item: dict[str, Any], file: str) -> Claim:
    at = f"claims file {file}: claim {item['id']}"
    is_ratio = item["metric"] == RATIO
    if is_ratio != ("numerator" in item and "denominator" in item):
        raise WhichshotError(f"{at}: a ratio claim has numerator and denominator, and only a ratio has them")
    factor = UNITS[item["unit"]][1]
    unknown = [m for m in _metrics_named(item) if m not in named_metrics()]
    if item["checkable"] != "no" and unknown:
        raise WhichshotError(f"{at}: unknown metric {unknown[0]!r} (not a metric of whichshot's figures)")
    if is_ratio and item["unit"] not in ("x", "fraction"):
        raise WhichshotError(f"{at}: a ratio is a pure number (unit x or fraction), not {item['unit']}")
    return Claim(
        claim_id=item["id"],
        file=file,
        citation=item["citation"],
        quote=item["quote"],
        value=item["value"] * factor,
        unit=item["unit"],
        metric=item["metric"],
        checkable=item["checkable"],
        why=item.get("why", ""),
        where=item.get("where", {}),
        numerator=item.get("numerator"),
        denominator=item.get("denominator"),
        tolerance=item.get("tolerance", DEFAULT_TOLERANCE),
        stated=item.get("stated", {}),
        value_as_stated=item["value"],
        value_range=tuple(sorted(v * factor for v in item["value_range"])) if "value_range" in item else None,
    )


PURE_NUMBERS = frozenset({"ratio", "fraction"})


def comparable_units(claim_unit: str, figure_unit: str) -> bool:
    """Whether a figure in figure_unit can be set against a claim in claim_unit."""
    converted = UNITS[claim_unit][0]
    return converted == figure_unit or {converted, figure_unit} <= PURE_NUMBERS
