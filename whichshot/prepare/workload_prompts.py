"""Workload prompts as exact token sequences: documents cut with the engine's own tokenizer,
the model's chat template applied where it has one (a plain completion prompt where not)."""

import functools
from collections.abc import Callable
from typing import Any

from whichshot.engine.base import RunningEngine
from whichshot.errors import WhichshotError
from whichshot.prepare import workloads as wl
from whichshot.prepare.user_texts import UserTexts, load_user_texts
from whichshot.shots.quality import self_repetition
from whichshot.shots.quality_fields import COPY_SPAN_TOKENS

# Which text kinds each workload has: new_code and explain have no input document.
TEXT_KINDS = {
    "verbatim_recall": ("real", "synthetic"),
    "needle": ("real", "synthetic"),
    "edit_file": ("real", "synthetic"),
    "new_code": ("real",),
    "explain": ("real",),
}
EDIT_MODULE = "colorsys"  # a real stdlib module of short top-level functions
NEEDLE_MIN_SECTIONS = 3  # the passphrase is planted between whole sections, with text on both sides
EDIT_MIN_FUNCTIONS = 2  # the edit renames one function of a run and checks that the others came back
# The text tokenized to learn this model's characters per token (CJK text has one or fewer a
# token, English three to four): enough to size the needle's draft document, short to tokenize.
CHARS_PER_TOKEN_SAMPLE = 32_000


def workload_keys(names: list[str], text_kinds: list[str]) -> list[tuple[str, str]]:
    """(workload, text kind) pairs the config asks for."""
    return [(name, kind) for name in names for kind in TEXT_KINDS[name] if kind in text_kinds]


def real_sections(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, text) sections of real text: the user's files (workloads.texts) or pydoc_data's."""
    texts = cfg.get("texts")
    return load_user_texts(texts, "workloads.texts").sections() if texts else wl.pydoc_sections()


def real_source(cfg: dict[str, Any]) -> dict[str, Any]:
    """What identifies the real text: the user's files by their pin, or pydoc_data."""
    texts = cfg.get("texts")
    return {"corpus": "user_files", **texts} if texts else {"corpus": "pydoc_topics"}


def text_words(cfg: dict[str, Any], text_kind: str) -> str:
    """The text a document is cut from, in words for a message: the user's path, or ours."""
    if text_kind == "synthetic":
        return "the synthetic filler"
    return f"workloads.texts: {cfg['texts']['path']}" if cfg.get("texts") else "pydoc_data's topics"


def min_document_tokens(workload: str, document_tokens: int) -> int:
    """The fewest tokens of text a document workload can be built from: the needle's document is cut
    to exactly document_tokens; the recall's is whole sections of up to document_tokens, at least
    half of it."""
    return document_tokens if workload == "needle" else document_tokens // 2


def longest_document(workload: str, source: list[tuple[str, str]], seed: int) -> str:
    """The document a document workload would make of every section of its text: the longest it can
    make (the builder takes whole sections that fit, so its documents are never longer)."""
    if workload == "needle":
        return wl.make_document(source, wl.make_passphrase(seed))
    return "\n\n".join(text for _title, text in source)


def _document(
    engine: RunningEngine, n_tokens: int, needle: str, source: list[tuple[str, str]], named: str
) -> str:
    """A document of exactly n_tokens tokens with the needle planted once in its first part, drafted
    from whole sections sized by this model's own characters per token, then cut exactly."""
    budget_chars = int(2.5 * n_tokens * _chars_per_token(engine, source))
    longest_chars = budget_chars // 4  # sections short enough that several whole ones fit
    sections, total, needle_at = [], 0, 0
    for title, text in source:
        block_chars = len(wl.make_document([(title, text)], None)) + 2  # its header and separator too
        if block_chars > longest_chars:
            continue
        sections.append((title, text))
        total += block_chars
        needle_at += total < 0.3 * budget_chars  # the needle goes before the section crossing 30 %
        if total >= budget_chars:
            break
    if len(sections) < NEEDLE_MIN_SECTIONS:
        raise WhichshotError(
            f"needle: {named}: {len(sections)} of its paragraphs are short enough (at most {longest_chars} "
            f"characters, a quarter of the draft for document_tokens={n_tokens}); the passphrase needs "
            f"{NEEDLE_MIN_SECTIONS} around it: split long paragraphs or raise document_tokens"
        )
    fraction = needle_at / len(sections)
    ids = engine.tokenize(wl.make_document(sections, needle, needle_position_fraction=fraction))
    if len(ids) < n_tokens:
        raise WhichshotError(
            f"needle: {named}: its paragraphs of at most {longest_chars} characters make a document of "
            f"{len(ids)} tokens in this model's tokenizer, fewer than document_tokens={n_tokens}: give "
            "more text or lower document_tokens"
        )
    document = engine.detokenize(ids[:n_tokens])
    if document.count(needle) != 1:
        raise WhichshotError(
            f"needle: {named}: the passphrase did not survive the cut to {n_tokens} tokens; raise "
            "document_tokens"
        )
    return document


def _chars_per_token(engine: RunningEngine, source: list[tuple[str, str]]) -> float:
    """Characters per token, in this model's tokenizer, of a document of this text's first sections
    (their headers included: short lines under long file names are half header)."""
    first, chars = [], 0
    for title, text in source:
        first.append((title, text))
        chars += len(text)
        if chars >= CHARS_PER_TOKEN_SAMPLE:
            break
    sample = wl.make_document(first, None)
    return len(sample) / max(len(engine.tokenize(sample)), 1)


def _recall_document(engine: RunningEngine, n_tokens: int, source: list[tuple[str, str]], named: str) -> str:
    """Whole sections of text, as many as fit n_tokens (at least half of it): a document that ends
    where its text ends, so a model asked to return it whole has no cut sentence to stop short of."""
    least = min_document_tokens("verbatim_recall", n_tokens)
    document, document_tokens = "", 0
    for _title, text in source:
        longer = f"{document}\n\n{text}" if document else text
        longer_tokens = len(engine.tokenize(longer))
        if longer_tokens > n_tokens:
            if document_tokens >= least:
                break
            continue  # this section would overflow a short document: try the next one
        document, document_tokens = longer, longer_tokens
    if document_tokens >= least:
        return document
    raise WhichshotError(
        f"verbatim_recall: {named}: its whole paragraphs of up to document_tokens={n_tokens} tokens make a "
        f"document of {document_tokens} tokens in this model's tokenizer, fewer than {least} (half of "
        "document_tokens, the least the recall takes): give more text or lower document_tokens"
    )


def _workload_dict(
    engine: RunningEngine, name: str, kind: str, cfg: dict[str, Any], real: Callable[[], list]
) -> dict[str, Any]:
    seed = cfg["seed"]
    source = {**(real_source(cfg) if kind == "real" else {"corpus": "synthetic_filler"}),
              "document_tokens": cfg["document_tokens"]}  # fmt: skip
    named = text_words(cfg, kind)
    if name == "needle":
        needle = wl.make_passphrase(seed)
        document = _document(engine, cfg["document_tokens"], needle, _sections(kind, real, seed), named)
        try:
            return wl.needle_question(document, needle, seed, kind, source)
        except ValueError as exc:
            raise WhichshotError(
                f"needle ({kind}) with document_tokens={cfg['document_tokens']}: {exc}"
            ) from None
    if name == "verbatim_recall":
        document = _recall_document(engine, cfg["document_tokens"], _sections(kind, real, seed), named)
        return wl.verbatim_recall(document, seed, None, kind, source)
    if name == "edit_file":
        return _edit_file(engine, kind, cfg, seed)
    return wl.new_code(seed) if name == "new_code" else wl.explain(seed)


def _sections(kind: str, real: Callable[[], list], seed: int) -> list[tuple[str, str]]:
    """The (title, text) sections a document is made of: real text, or synthetic filler."""
    return real() if kind == "real" else wl.synthetic_sections(400, 120, seed)


def _edit_file(engine: RunningEngine, kind: str, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """A file of whole functions that fits document_tokens in this model's tokens, so it can come back
    whole: real = the longest run of consecutive top-level functions (the earliest of equal length)
    of the user's edit_source or of colorsys, synthetic = the most generated functions."""
    budget_tokens = cfg["document_tokens"]

    def tokens(item: dict[str, Any]) -> int:
        return len(engine.tokenize(item["checks"]["rename"]["file"]))

    if kind == "real":
        text, build = _real_edit_source(cfg, seed)
        found = _longest_run(wl.function_count(text), build, lambda item: tokens(item) <= budget_tokens)
        if found is not None:
            return found
    else:
        for n in range(24, EDIT_MIN_FUNCTIONS - 1, -1):
            item = wl.edit_file_synthetic(seed, n)
            if tokens(item) <= budget_tokens:
                return item
    raise WhichshotError(
        f"edit_file: {_edit_source_words(cfg, kind)}: no run of {EDIT_MIN_FUNCTIONS} whole functions fits "
        f"document_tokens={budget_tokens} in this model's tokens; raise document_tokens"
    )


def _edit_source_words(cfg: dict[str, Any], text_kind: str) -> str:
    if text_kind == "synthetic":
        return "the synthetic module"
    spec = cfg.get("edit_source")
    return f"workloads.edit_source: {spec['path']}" if spec else f"the standard library's {EDIT_MODULE}"


def _longest_run(total: int, build, fits) -> dict[str, Any] | None:
    """The workload of the longest run of >= 2 consecutive functions that fits (the earliest of equal
    length); a run grows from each start until it no longer fits, so a long file costs few checks."""
    best, best_count = None, 1
    for first in range(total - 1):
        count = best_count + 1  # only a longer run than the best so far can win
        while first + count <= total:
            try:
                item = build((first, count))
            except ValueError:  # no public function to rename in this run: try a longer one
                count += 1
                continue
            if not fits(item):
                break
            best, best_count = item, count
            count += 1
    return best


def _real_edit_source(cfg: dict[str, Any], seed: int):
    """(source text, run -> workload) of the real edit: the user's file, else colorsys; read once."""
    spec = cfg.get("edit_source")
    if not spec:
        text, source = wl.module_source(EDIT_MODULE)
        source["kind"] = "stdlib_module_functions"  # the edit takes a run of its functions
    else:
        texts = load_edit_source(spec)
        text = texts.files[0].text
        source = {"kind": "user_file", "path": texts.path, "file_sha256": texts.sha256}
    return text, lambda run: wl.edit_source(text, source, seed, run)


def load_edit_source(spec: dict[str, str]) -> UserTexts:
    """The user's file for edit_file: one pinned Python file of at least EDIT_MIN_FUNCTIONS top-level
    functions (the config check reads it when the workflow loads, the prompt builder again)."""
    texts = load_user_texts(spec, "workloads.edit_source")
    if len(texts.files) != 1:
        raise WhichshotError(f"workloads.edit_source: {texts.path} must be one Python file, not a folder")
    try:
        functions = wl.function_count(texts.files[0].text)
    except ValueError as exc:
        raise WhichshotError(f"workloads.edit_source: {texts.path}: {exc}") from None
    if functions < EDIT_MIN_FUNCTIONS:
        raise WhichshotError(
            f"workloads.edit_source: {texts.path} has {functions} top-level function(s); the edit renames "
            f"one of a run of at least {EDIT_MIN_FUNCTIONS}"
        )
    return texts


def tokenized_prompt(
    engine: RunningEngine,
    messages: list[dict[str, str]],
    plain_text: str,
    has_chat_template: bool,
    bos_token_id: int | None,
) -> tuple[str, list[int], str]:
    """(prompt text, its token ids, how it was formed): the model's chat template over the
    messages, or the plain completion text (BOS first) for a model without one."""
    if has_chat_template:
        text = engine.apply_chat_template(messages)
        return text, engine.tokenize(text, parse_special=True), "chat template"
    ids = ([bos_token_id] if bos_token_id is not None else []) + engine.tokenize(plain_text)
    return plain_text, ids, "plain completion (model has no chat template)"


def build_workload_prompts(
    engine: RunningEngine, cfg: dict[str, Any], has_chat_template: bool, bos_token_id: int | None
) -> dict[str, Any]:
    """Every configured (workload, text kind) as token ids plus the checks for its output."""
    prompts = {}
    real = functools.cache(lambda: real_sections(cfg))  # the user's files are read once per call
    for name, kind in workload_keys(cfg["names"], cfg["text_kinds"]):
        item = _workload_dict(engine, name, kind, cfg, real)
        text, ids, style = tokenized_prompt(
            engine, item["messages"], item["completion_prompt"], has_chat_template, bos_token_id
        )
        prompts[f"{name}-{kind}"] = {
            "workload": name,
            "text_kind": kind,
            "prompt_style": style,
            "token_ids": ids,
            "prompt_tokens": len(ids),
            "self_repetition": self_repetition(ids, COPY_SPAN_TOKENS),
            "text": text,
            "checks": item["checks"],
            "source": item["source"],
        }
    return prompts
