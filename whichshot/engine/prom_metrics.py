"""Speculative-decoding counters from a server's Prometheus /metrics text, as per-shot deltas.

The counters are process-wide: a delta between two reads counts everything the server did in
between, not only our shot. Names are the servers' own (vLLM's and llama-server's, which share
the spec_decode_* naming); a counter a server does not export stays None (not measured).
"""

import math
import re

# logical counter -> the exported names that hold it, first found wins
SPEC_COUNTERS: dict[str, tuple[str, ...]] = {
    "draft_tokens": (
        "vllm:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
    ),
    "accepted_tokens": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ),
    "drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str, split_by: tuple[str, ...] = ()) -> dict[str, float]:
    """Metric name -> value summed over its label sets (e.g. vLLM's one series per engine); a sample
    that carries a label of `split_by` also counts under `name{label="value"}` (vLLM's acceptance per
    draft position: split_by=("position",))."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match or line.lstrip().startswith("#"):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        name = match.group(1)
        labels = dict(_LABEL.findall(match.group(2) or ""))
        keys = [name, *(f'{name}{{{label}="{labels[label]}"}}' for label in split_by if label in labels)]
        for key in keys:
            values[key] = values.get(key, 0.0) + value
    return values


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float | str | None]:
    """Each logical spec counter's increase between two reads, and the names it came from.

    None where the server does not export the counter, or where it went down (the process
    restarted between the reads, so the delta is unknown).
    """
    deltas: dict[str, float | str | None] = {}
    used = []
    for logical, names in SPEC_COUNTERS.items():
        name = next((n for n in names if n in before and n in after), None)
        delta = after[name] - before[name] if name else None
        deltas[logical] = delta if delta is not None and delta >= 0 else None
        if name:
            used.append(name)
    deltas["source"] = "|".join(used) or None
    return deltas
