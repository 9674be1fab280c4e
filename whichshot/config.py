"""Config validation with one readable line per problem, and defaults from the schema."""

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from whichshot.engine_config import check_engines, check_spec_modes
from whichshot.errors import WhichshotError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.yaml"


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """The config JSON schema (YAML on disk)."""
    return yaml.safe_load(path.read_text())


def config_problems(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Every schema violation as 'field.path: problem', most specific first."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(e.absolute_path), e.message))
    return [f"{_field_path(e)}: {_problem(e)}" for e in errors]


def check_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> None:
    """Raise WhichshotError naming the first bad field; then the semantic checks."""
    problems = config_problems(config, schema or load_schema())
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise WhichshotError(f"invalid config: {problems[0]}{more}")
    _check_grid_not_empty(config)
    _check_synthetic_donors(config)
    _check_draft_models(config)
    _check_workload_models(config)
    _check_prompts_fit_context(config, schema or load_schema())


def check_config_file(path: str | Path) -> None:
    """Refuse a YAML/JSON config that gives one key twice: loaders silently keep the last one."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return  # not parseable at all: the loader reports that itself
    _check_unique_keys(root, [], Path(path).name)


def _check_unique_keys(node: yaml.Node | None, where: list[str], file_name: str) -> None:
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_unique_keys(item, [*where, str(index)], file_name)
    if not isinstance(node, yaml.MappingNode):
        return
    seen: set[str] = set()
    for key, value in node.value:
        name = str(key.value)
        if name in seen:
            raise WhichshotError(
                f"invalid config: {'.'.join([*where, name])}: given twice ({file_name} line "
                f"{key.start_mark.line + 1}); names must be unique"
            )
        seen.add(name)
        _check_unique_keys(value, [*where, name], file_name)


def _check_prompts_fit_context(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Every prompt plus its output must fit every context window it is run with."""
    defaults = {k: v.get("default") for k, v in schema["properties"]["protocol"]["properties"].items()}
    protocol = {**defaults, **config.get("protocol", {})}
    need = max(config["prompts"]["lengths"]) + protocol["output_tokens"]
    if need > min(protocol["context_tokens"]):
        raise WhichshotError(
            f"invalid config: prompts.lengths: a {max(config['prompts']['lengths'])}-token prompt plus "
            f"{protocol['output_tokens']} output tokens does not fit protocol.context_tokens "
            f"{min(protocol['context_tokens'])}"
        )


def _check_workload_models(config: dict[str, Any]) -> None:
    models = config.get("models", {})
    for name in config.get("workloads", {}).get("models", []):
        if name not in models or not models[name].get("measure", True):
            raise WhichshotError(
                f"invalid config: workloads.models: {name!r} is not a measured model in models"
            )


def _check_draft_models(config: dict[str, Any]) -> None:
    # Engines and modes per engine kind (draft models, loopback binding): engine_config.py.
    check_engines(config)
    check_spec_modes(config)


def _check_synthetic_donors(config: dict[str, Any]) -> None:
    for name, spec in config.get("models", {}).items():
        donor = spec.get("synthetic", {}).get("donor")
        if donor is not None and ("synthetic" in config["models"].get(donor, {"synthetic": 1})):
            raise WhichshotError(
                f"invalid config: models.{name}.synthetic.donor: {donor!r} is not a real model in models"
            )


def _check_grid_not_empty(config: dict[str, Any]) -> None:
    protocol = config.get("protocol", {})
    if protocol.get("cold_processes", 3) == 0 and protocol.get("warm_shots", 6) == 0:
        raise WhichshotError(
            "invalid config: protocol: cold_processes and warm_shots are both 0, the grid is empty"
        )


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def _problem(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return f"unknown key ({error.message})"
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        problem = "give exactly one of 'packages' or 'path' (each with 'sha256'), or 'synthetic'"
        sources = [k for k in ("packages", "path") if k in error.instance]
        if len(sources) == 1 and "sha256" not in error.instance:
            problem += f": 'sha256' is missing for '{sources[0]}'"
        return problem
    if error.validator == "pattern":
        return f"{error.instance!r} is not of the expected form ({error.validator_value})"
    return error.message
