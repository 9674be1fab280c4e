"""Config validation with one readable line per problem, and defaults from the schema.

The schema is the one place a config default is written: `with_defaults` fills every default it
declares (also inside per-name maps such as engines.<name>), so no Python code repeats one.
"""

import copy
import itertools
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from snakemake.utils import update_config  # snakemake's own merge of config files: what a run does

from whichshot.claims.grid import extend_grid
from whichshot.claims.load import load_claims
from whichshot.engine import engine_kinds, import_engine_modules, load_engine
from whichshot.engine_config import (
    check_compile_caches,
    check_engines,
    check_load_axes,
    check_spec_modes,
    check_warmups,
)
from whichshot.errors import WhichshotError
from whichshot.measure.grid import workload_protocol
from whichshot.prepare.synthetic import check_synthetic_shape
from whichshot.prepare.traces import load_traces
from whichshot.prepare.user_inputs import check_user_inputs
from whichshot.shots.axes import AXES
from whichshot.tables import record_schema


def load_schema() -> dict[str, Any]:
    """The config JSON schema: whichshot/schemas/config.schema.yaml with every registered engine
    kind's own keys (its config_schema, when kind names it) and speculative-mode block joined in."""
    schema = copy.deepcopy(record_schema("config"))
    entry = schema["properties"]["engines"]["additionalProperties"]
    mode = schema["properties"]["spec_modes"]["additionalProperties"]
    entry["properties"]["kind"]["enum"] = list(engine_kinds())
    entry["allOf"] = []
    mode["additionalProperties"] = False
    for kind in engine_kinds():
        engine = load_engine(kind)
        entry["allOf"].append({"if": {"required": ["kind"], "properties": {"kind": {"const": kind}}},
                               "then": engine.config_schema})  # fmt: skip
        mode["properties"][kind] = engine.mode_schema
        for key in engine.legacy_mode_keys:  # the older form: the kind's keys at the mode's top
            mode["properties"][key] = engine.mode_schema["properties"][key]
    return schema


def _fill_defaults(validator, properties, instance, schema):
    if isinstance(instance, dict):
        for name, subschema in properties.items():
            if "default" in subschema:
                instance.setdefault(name, copy.deepcopy(subschema["default"]))
    yield from jsonschema.Draft202012Validator.VALIDATORS["properties"](
        validator, properties, instance, schema
    )


_DefaultFiller = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": _fill_defaults})


def with_defaults(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a valid config with every default of the schema filled in."""
    filled = copy.deepcopy(config)
    for _error in _DefaultFiller(schema or load_schema()).iter_errors(filled):
        pass  # check_config reports problems; this pass only fills
    return filled


def config_problems(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Every schema violation as 'field.path: problem', most specific first."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(e.absolute_path), e.message))
    return [f"{_field_path(e)}: {_problem(e)}" for e in errors]


def check_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Raise WhichshotError naming the first bad field; then the semantic checks. Returns the
    config with the schema's defaults filled in."""
    # Kinds a config adds must be known before its engines can be checked (the list itself is
    # checked with everything else below).
    import_engine_modules(config.get("engine_modules") or [])
    schema = schema or load_schema()
    problems = config_problems(config, schema)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise WhichshotError(f"invalid config: {problems[0]}{more}")
    config = _with_claimed_cells(with_defaults(config, schema), schema)
    _check_grid_not_empty(config)
    _check_looks(config["protocol"])
    _check_synthetic_donors(config)
    _check_synthetic_shapes(config)
    _check_draft_models(config)
    _check_section_models(config)
    _check_prompts_fit_context(config)
    check_output_budget(config["workloads"])
    _check_traces(config)
    check_user_inputs(config)
    _check_placement(config)
    return config


DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
REPLACES_DEFAULT = "--replace-workflow-config"  # a ready config that says so is run without the default


def config_as_run(path: str | Path, default: Path = DEFAULT_CONFIG) -> dict[str, Any]:
    """The config Snakemake runs with `--configfile path`: the file on top of the default config,
    unless the file says it is run with --replace-workflow-config; checked, with the schema's defaults."""
    text = Path(path).read_text(encoding="utf-8")
    config = {} if REPLACES_DEFAULT in text else yaml.safe_load(default.read_text(encoding="utf-8"))
    update_config(config, yaml.safe_load(text))
    return check_config(copy.deepcopy(config))


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


def _check_prompts_fit_context(config: dict[str, Any]) -> None:
    """Every prompt plus its output must fit every context window it is run with."""
    protocol = config["protocol"]
    need = max(config["prompts"]["lengths"]) + protocol["output_tokens"]
    if need > min(protocol["context_tokens"]):
        raise WhichshotError(
            f"invalid config: prompts.lengths: a {max(config['prompts']['lengths'])}-token prompt plus "
            f"{protocol['output_tokens']} output tokens does not fit protocol.context_tokens "
            f"{min(protocol['context_tokens'])}"
        )


# Workloads whose whole input comes back in the output: their file or document must fit the budget.
RETURNED_WHOLE = ("edit_file", "verbatim_recall")
RETURN_MARGIN = 1.25  # output budget per input token: fences, a preamble, tokens merged differently


def check_output_budget(workloads: dict[str, Any]) -> None:
    """The workloads that return their input whole need an output budget the size of that input
    (up to document_tokens) and a margin."""
    asked = [name for name in workloads["names"] if name in RETURNED_WHOLE]
    needed = int(workloads["document_tokens"] * RETURN_MARGIN)
    if asked and workloads["max_output_tokens"] < needed:
        raise WhichshotError(
            f"invalid config: workloads.max_output_tokens: {workloads['max_output_tokens']} cannot hold "
            f"{', '.join(asked)}: they return an input of up to document_tokens="
            f"{workloads['document_tokens']} tokens whole; set it >= {needed} ({RETURN_MARGIN} x "
            "document_tokens) or lower document_tokens"
        )


def _check_placement(config: dict[str, Any]) -> None:
    """placement.by names grid axes (the shot columns a figure's cells differ in); a node comparison
    names at least two nodes."""
    placement = config["placement"]
    unknown = [axis for axis in placement["by"] if axis not in AXES]
    if unknown:
        raise WhichshotError(
            f"invalid config: placement.by: {', '.join(map(repr, unknown))} is not a grid axis "
            f"({', '.join(AXES)})"
        )
    if placement["compare_nodes"] and len(placement["nodes"]) < 2:
        raise WhichshotError(
            "invalid config: placement.compare_nodes needs at least two nodes in placement.nodes "
            f"to compare (got {placement['nodes'] or 'none'})"
        )


def _check_section_models(config: dict[str, Any]) -> None:
    """protocol.models and workloads.models name measured models of this config; protocol.engines
    and workloads.engines name its engines."""
    models = config["models"]
    for section in ("protocol", "workloads"):
        for name in config[section]["models"]:
            if name not in models or not models[name]["measure"]:
                raise WhichshotError(
                    f"invalid config: {section}.models: {name!r} is not a measured model in models"
                )
        for name in config[section]["engines"]:
            if name not in config["engines"]:
                raise WhichshotError(
                    f"invalid config: {section}.engines: {name!r} is not an engine in engines"
                )


def _with_claimed_cells(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Every claims file read and checked now (a bad one stops the run before anything is
    measured); with claims_extend_grid, the grid grown by the axis values the claims name."""

    claims = [claim for path in config["claims"] for claim in load_claims(Path(path))]
    if not config["claims_extend_grid"]:
        return config
    extended, added = extend_grid(config, claims)
    problems = config_problems(extended, schema)
    if problems:
        raise WhichshotError(f"invalid config: claims_extend_grid added {'; '.join(added)}: {problems[0]}")
    return extended


def _check_traces(config: dict[str, Any]) -> None:
    """Each trace's models are measured models; its file is read, pinned and parsed now, so a bad
    trace stops the run before anything is measured."""

    models = config["models"]
    for name, spec in config["traces"].items():
        for model in spec["models"]:
            if model not in models or not models[model]["measure"]:
                raise WhichshotError(
                    f"invalid config: traces.{name}.models: {model!r} is not a measured model in models"
                )
    load_traces(config)


def _check_draft_models(config: dict[str, Any]) -> None:
    # Engines and modes per engine kind (draft models, loopback binding): engine_config.py.
    check_engines(config)
    check_spec_modes(config)
    check_warmups(config)
    check_load_axes(config)
    check_compile_caches(config)


def _check_synthetic_donors(config: dict[str, Any]) -> None:
    for name, spec in config["models"].items():
        donor = spec.get("synthetic", {}).get("donor")
        if donor is not None and ("synthetic" in config["models"].get(donor, {"synthetic": 1})):
            raise WhichshotError(
                f"invalid config: models.{name}.synthetic.donor: {donor!r} is not a real model in models"
            )


def _check_synthetic_shapes(config: dict[str, Any]) -> None:

    for name, spec in config["models"].items():
        if "synthetic" in spec:
            check_synthetic_shape(f"models.{name}.synthetic", spec["synthetic"])


def _check_grid_not_empty(config: dict[str, Any]) -> None:
    protocol = config["protocol"]
    if protocol["cold_processes"] == 0 and protocol["warm_shots"] == 0:
        raise WhichshotError(
            "invalid config: protocol: cold_processes and warm_shots are both 0, the grid is empty"
        )
    asked = [f"workloads {', '.join(config['workloads']['names'])}"] if config["workloads"]["names"] else []
    asked += [f"trace {name}" for name in config["traces"]]
    lengths = workload_protocol(config)
    if asked and not (lengths["cold_processes"] or lengths["warm_shots"]):
        raise WhichshotError(
            "invalid config: workloads: cold_processes and warm_shots are both 0 (where unset, the "
            f"protocol's), so {' and '.join(asked)} would run no series"
        )


def _check_looks(protocol: dict[str, Any]) -> None:
    looks = protocol["until_decided"]["looks"]
    if any(later <= earlier for earlier, later in itertools.pairwise(looks)):
        raise WhichshotError(
            f"invalid config: protocol.until_decided.looks: {looks} must increase (each look's series count)"
        )


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def _first_reason(error: jsonschema.ValidationError) -> str:
    """The most specific reason among a oneOf's failed branches that took the object form."""
    reasons = [e.message for e in error.context if e.validator != "enum"]
    return reasons[0] if reasons else error.message


def _problem(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return f"unknown key ({error.message})"
    if (
        error.validator == "oneOf"
        and isinstance(error.instance, dict)
        and error.path
        and error.path[-1] == "corpus"
    ):
        return "give a built-in corpus name or your own text as {path, sha256} (" + _first_reason(error) + ")"
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        problem = "give exactly one of 'packages' or 'path' (each with 'sha256'), or 'synthetic'"
        sources = [k for k in ("packages", "path") if k in error.instance]
        if len(sources) == 1 and "sha256" not in error.instance:
            problem += f": 'sha256' is missing for '{sources[0]}'"
        return problem
    if error.validator == "pattern":
        return f"{error.instance!r} is not of the expected form ({error.validator_value})"
    if error.validator == "oneOf" and isinstance(error.instance, str):
        # one value or a list of them: the value's own branch says what it may be
        return next((e.message for e in error.context if e.validator == "enum"), error.message)
    return error.message


# A model entry's keys that make no file: its description, and whether it is measured or only a donor.
MODEL_ENTRY_NOTES = ("description", "measure")


def model_file_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """What of a model entry makes its file (packages, path, sha256, synthetic): fetch_model's
    params, so a new description fetches nothing again."""
    return {key: value for key, value in spec.items() if key not in MODEL_ENTRY_NOTES}
