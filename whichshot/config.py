"""Config validation with one readable line per problem, and defaults from the schema."""

from pathlib import Path
from typing import Any

import jsonschema
import yaml

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


def _check_draft_models(config: dict[str, Any]) -> None:
    for name, mode in config.get("spec_modes", {}).items():
        draft = mode.get("draft_model")
        if draft is not None and draft not in config["models"]:
            raise WhichshotError(f"invalid config: spec_modes.{name}.draft_model: {draft!r} is not in models")
        if (mode.get("type") == "draft-simple") != (draft is not None):
            raise WhichshotError(
                f"invalid config: spec_modes.{name}: draft-simple needs draft_model, and only it takes one"
            )


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
        return "give exactly one of 'packages' or 'path' (each with 'sha256'), or 'synthetic'"
    if error.validator == "pattern":
        return f"{error.instance!r} is not of the expected form ({error.validator_value})"
    return error.message
