"""The grid's axes in one table: each is a typed column of every shot (x-axis in shots.schema.yaml),
and a cell is the group of shots that share all of them. The table's order is the order of a cell
id's parts; a part is the axis' prefix and value, left out where the value is the one that older
runs, from before the axis existed, implicitly had (so their ids stay as they were)."""

from dataclasses import dataclass
from typing import Any

DEFAULT_PREFILL_CHUNK = 512  # llama-server's default -ub: the chunk a run without the axis used
ONE_STREAM = 1
DEFAULT_WARMUP = "engine_default"
BASE_WORKLOAD = "continue_text"  # the protocol grid's fixed-length continuation of real text
TRACE_WORKLOAD = "trace"  # a request of the user's own trace
NO_DRAFT = "none"  # the speculative mode that drafts nothing
# The compile cache a process starts with: the engine's own (whatever it holds), a new empty folder,
# or one that an earlier start of the same setting filled (an engine without one runs only the first).
DEFAULT_COMPILE_CACHE = "engine_default"
EMPTY_COMPILE_CACHE = "empty"
FILLED_COMPILE_CACHE = "filled"

# Prompt variants a series cycles through, by order: "same" repeats A; the seed's reversal
# control runs A,B,A,B... against B,A,B,A... so that a shot's position and its prompt separate.
ORDERS = {"same": ("A",), "forward": ("A", "B"), "reverse": ("B", "A")}


@dataclass(frozen=True)
class Axis:
    name: str
    type: type  # of a value once read back (int, float or str); None where the axis has no value
    prefix: str = ""  # before the value in a cell id: "p" + 256 -> "p256"
    unnamed: Any = None  # a value left out of the cell id, besides None


AXIS_TABLE = (
    Axis("engine", str),
    Axis("model", str),
    Axis("workload", str),
    Axis("text_kind", str),
    Axis("prompt_tokens_requested", int, "p"),
    Axis("protocol", str),
    Axis("rest_s", float, "rest"),
    Axis("precondition_s", float, "pre"),
    Axis("context_tokens_requested", int, "ctx"),
    Axis("order", str),
    Axis("spec_mode", str),
    Axis("engine_warmup", str),
    Axis("trace", str),
    Axis("request_id", str),
    Axis("prefill_chunk_tokens", int, "ub", DEFAULT_PREFILL_CHUNK),
    Axis("parallel_streams", int, "np", ONE_STREAM),
    Axis("node_requested", str, "on-"),
    Axis("compile_cache", str, "cc-", DEFAULT_COMPILE_CACHE),
)
AXES = tuple(axis.name for axis in AXIS_TABLE)
AXIS = {axis.name: axis for axis in AXIS_TABLE}
# The axes that shape a series (cold or warm, the rest, the warm-up shots), at a fresh process's
# first shot: a warm cell's cold sibling has these values and every other axis of its own.
FRESH_PROCESS = {"protocol": "cold", "rest_s": 0.0, "precondition_s": 0.0}
SERIES_SHAPE = tuple(FRESH_PROCESS)
