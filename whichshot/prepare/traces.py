"""Request traces: the user's own requests, read from the formats people already keep them in.

JSONL: one JSON object per line with `prompt` (a plain completion prompt) or `messages` (OpenAI
chat messages: role and content), plus optional `max_tokens`, `id` and `text_kind` (real or
synthetic, default real). ShareGPT: one JSON array of conversations, each {"id", "conversations":
[{"from": "human" | "gpt" | "system", "value"}]}; a conversation becomes one request that asks for
the reply to its last human turn (the recorded reply after it is dropped).

A trace file is pinned by sha256 like a model; a line that is not a request is refused with its
line number. Requests are named r1, r2, ... in file order (the file's own ids are kept as labels).
"""

import json
from dataclasses import dataclass, field
from typing import Any

from whichshot.errors import WhichshotError
from whichshot.prepare.user_texts import load_user_texts

FORMATS = ("jsonl", "sharegpt")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "system": "system"}  # fmt: skip
_CHAT_ROLES = ("system", "user", "assistant")
TEXT_KINDS = ("real", "synthetic")


@dataclass(frozen=True)
class TraceRequest:
    request_id: str  # r1, r2, ... in file order
    label: str  # the file's own id for it, else its line (JSONL) or index (ShareGPT)
    messages: tuple[dict[str, str], ...] = ()  # chat messages, or
    prompt: str | None = None  # a plain completion prompt
    max_tokens: int | None = None
    text_kind: str = "real"

    def as_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "label": self.label, "messages": list(self.messages),
                "prompt": self.prompt, "max_tokens": self.max_tokens,
                "text_kind": self.text_kind}  # fmt: skip


@dataclass(frozen=True)
class Trace:
    name: str
    path: str
    sha256: str
    format: str
    requests: tuple[TraceRequest, ...] = field(default_factory=tuple)


def load_trace(name: str, spec: dict[str, Any]) -> Trace:
    """The trace config entry `name` read, pinned and parsed; one clear line for any bad input."""
    where = f"traces.{name}"
    texts = load_user_texts(spec, where)
    if len(texts.files) != 1:
        raise WhichshotError(f"{where}: {texts.path} must be one trace file, not a folder")
    form = _format_of(spec, texts.path, where)
    text = texts.files[0].text
    requests = _jsonl(text, texts.path, where) if form == "jsonl" else _sharegpt(text, texts.path, where)
    if not requests:
        raise WhichshotError(f"{where}: {texts.path} holds no request")
    limit = spec.get("max_requests")
    return Trace(name, texts.path, texts.sha256, form, tuple(requests[:limit] if limit else requests))


def _format_of(spec: dict[str, Any], path: str, where: str) -> str:
    form = spec.get("format", "auto")
    if form != "auto":
        return form
    if path.endswith(".jsonl"):
        return "jsonl"
    if path.endswith(".json"):
        return "sharegpt"
    raise WhichshotError(
        f"{where}: cannot tell the format of {path} from its name; set format: jsonl or sharegpt"
    )


def _jsonl(text: str, path: str, where: str) -> list[TraceRequest]:
    requests = []
    # Lines end at \n only: JSON strings may hold U+2028 and friends, which splitlines() would cut at.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        at = f"{where}: {path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WhichshotError(f"{at}: not JSON ({exc.msg})") from None
        requests.append(_request(item, len(requests) + 1, f"line {number}", at))
    return requests


def _request(item: Any, index: int, position: str, at: str) -> TraceRequest:
    if not isinstance(item, dict):
        raise WhichshotError(f"{at}: a request is a JSON object, not {type(item).__name__}")
    has_prompt, has_messages = "prompt" in item, "messages" in item
    if has_prompt == has_messages:
        raise WhichshotError(f"{at}: a request has either 'prompt' or 'messages' (one of them)")
    prompt = item.get("prompt")
    if has_prompt and (not isinstance(prompt, str) or not prompt.strip()):
        raise WhichshotError(f"{at}: 'prompt' must be non-empty text")
    messages = _messages(item["messages"], at) if has_messages else ()
    max_tokens = _max_tokens(item.get("max_tokens"), at)
    kind = _text_kind(item.get("text_kind", "real"), at)
    return TraceRequest(f"r{index}", str(item.get("id", position)), messages, prompt, max_tokens, kind)


def _messages(messages: Any, at: str) -> tuple[dict[str, str], ...]:
    if not isinstance(messages, list) or not messages:
        raise WhichshotError(f"{at}: 'messages' must be a non-empty list")
    found = []
    for number, message in enumerate(messages, start=1):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in _CHAT_ROLES or not isinstance(content, str):
            raise WhichshotError(
                f"{at}: message {number} needs a role ({', '.join(_CHAT_ROLES)}) and text content"
            )
        found.append({"role": role, "content": content})
    if found[-1]["role"] != "user":
        raise WhichshotError(f"{at}: the last message must be the user's (the request to answer)")
    return tuple(found)


def _max_tokens(value: Any, at: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WhichshotError(f"{at}: 'max_tokens' must be a positive integer, not {value!r}")
    return value


def _text_kind(value: Any, at: str) -> str:
    if value not in TEXT_KINDS:
        raise WhichshotError(f"{at}: 'text_kind' must be real or synthetic, not {value!r}")
    return value


def _sharegpt(text: str, path: str, where: str) -> list[TraceRequest]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WhichshotError(f"{where}: {path} line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(items, list):
        raise WhichshotError(f"{where}: {path}: a ShareGPT file is a JSON array of conversations")
    requests = []
    for index, item in enumerate(items, start=1):
        at = f"{where}: {path} conversation {index}"
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise WhichshotError(f"{at}: needs a 'conversations' list")
        messages = [_sharegpt_turn(turn, number, at) for number, turn in enumerate(turns, start=1)]
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
        if last_user is None:
            raise WhichshotError(f"{at}: has no human turn to answer")
        request = {"messages": messages[: last_user + 1], "id": item.get("id", f"conversation {index}")}
        requests.append(_request(request, len(requests) + 1, f"conversation {index}", at))
    return requests


def _sharegpt_turn(turn: Any, number: int, at: str) -> dict[str, str]:
    speaker = turn.get("from") if isinstance(turn, dict) else None
    value = turn.get("value") if isinstance(turn, dict) else None
    if speaker not in _SHAREGPT_ROLES or not isinstance(value, str):
        raise WhichshotError(f"{at}: turn {number} needs 'from' (human, gpt or system) and a text 'value'")
    return {"role": _SHAREGPT_ROLES[speaker], "content": value}


def load_traces(config: dict[str, Any]) -> dict[str, Trace]:
    """Every configured trace, read and checked (before any measurement)."""
    return {name: load_trace(name, spec) for name, spec in config.get("traces", {}).items()}
