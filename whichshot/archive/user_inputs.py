"""The user's own inputs in an archive: by path and sha256 only, unless archive.include_inputs.

User inputs are prompts.corpus and workloads.texts / edit_source when they are files, and every
trace. Without include_inputs, the prompts files copied into the archive keep no text, token ids
or checks of any prompt cut from them (a sha256 of the ids stands in); with it, the inputs
themselves are copied under inputs/.
"""

import json
import shutil
from pathlib import Path
from typing import Any

from whichshot.hashing import sha256_text
from whichshot.prepare.user_texts import user_source_pin

INPUTS_FILE = "inputs.json"
_TEXT_FIELDS = ("text", "token_ids", "checks")


def user_inputs(config: dict[str, Any]) -> list[dict[str, str]]:
    """Where each user input is named in the config, its path and its pin."""
    found = []
    corpus = config.get("prompts", {}).get("corpus")
    if isinstance(corpus, dict):
        found.append({"where": "prompts.corpus", **corpus})
    for key in ("texts", "edit_source"):
        spec = config.get("workloads", {}).get(key)
        if spec:
            found.append({"where": f"workloads.{key}", **spec})
    for name, spec in config.get("traces", {}).items():
        found.append({"where": f"traces.{name}", "path": spec["path"], "sha256": spec["sha256"]})
    return [{"where": f["where"], "path": str(f["path"]), "sha256": f["sha256"]} for f in found]


def archive_inputs(root: Path, config: dict[str, Any], prompts_files: list[Path]) -> None:
    """Copy the inputs in (include_inputs) or strip their text from the archived prompts files;
    either way write inputs.json saying which."""
    inputs = user_inputs(config)
    included = bool(config.get("archive", {}).get("include_inputs"))
    for item in inputs:
        item["in_archive"] = f"inputs/{item['where']}/{Path(item['path']).name}" if included else None
        if included:
            _copy(Path(item["path"]).expanduser(), root / item["in_archive"])
    if inputs and not included:
        for path in prompts_files:
            path.write_text(json.dumps(redact_prompts(json.loads(path.read_text()), config), indent=1))
    (root / INPUTS_FILE).write_text(json.dumps({"include_inputs": included, "inputs": inputs}, indent=1))


def redact_prompts(prompts: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """A prompts file without the text, token ids and checks of prompts cut from user inputs."""
    prompts = json.loads(json.dumps(prompts))  # a deep copy
    if isinstance(config.get("prompts", {}).get("corpus"), dict):
        for prompt in prompts.get("prompts", {}).values():
            _strip(prompt)
    for prompt in prompts.get("workloads", {}).values():
        source = prompt.get("source", {})
        if user_source_pin(source):
            _strip(prompt)
    for trace in prompts.get("traces", {}).values():
        for prompt in trace.get("requests", {}).values():
            _strip(prompt)
    return prompts


def _strip(prompt: dict[str, Any]) -> None:
    ids = prompt.get("token_ids")
    if ids is not None:
        prompt["token_ids_sha256"] = sha256_text(",".join(map(str, ids)))
    for field in _TEXT_FIELDS:
        prompt.pop(field, None)
    prompt["redacted"] = "user input: archive.include_inputs is false"


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)
