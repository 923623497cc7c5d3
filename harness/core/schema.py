"""Shared pydantic base and YAML/JSON loading with one-line, file-and-field error messages."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.core.errors import ConfigError, suggest
from harness.core.files import refuse_special


class Strict(BaseModel):
    """Unknown keys are refused; models are immutable once validated; no float field takes NaN or
    infinity (`--set opt_base_learning_rate=.nan`, a descriptor's `memory_gib: .inf`): no config,
    system or plan value means either, and both pass every `>`/`<` check silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)


def _read_text(path: Path, not_utf8: str) -> str:
    """An input file's UTF-8 text; a FIFO, an unreadable file or other bytes are one ConfigError
    (`not_utf8` ends the line for the last: what the file should have been)."""
    refuse_special(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); {not_utf8}") from None


def load_json(path: Path, what: str = "a JSON object") -> dict[str, Any]:
    """Read a JSON object: every way a file can fail to be one (unreadable, a FIFO, not UTF-8,
    broken JSON, a number over Python's 4,300-digit limit, not an object) is one ConfigError
    naming the file; `what` says what was expected there."""
    text = _read_text(path, f"expected {what}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON ({e.msg} at line {e.lineno}); expected {what}") from None
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"{path}: not usable JSON ({str(e).split(';')[0]}); expected {what}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected {what}, found a JSON {type(data).__name__}")
    return data


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping, turning syntax errors into a ConfigError naming file and line."""
    text = _read_text(path, "YAML files must be UTF-8 (a binary or mis-encoded file?)")
    if "\0" in text:
        raise ConfigError(f"{path}: contains NUL bytes; not a YAML text file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}:{where}: malformed YAML: {problem}") from None
    except ValueError as e:  # an integer over Python's 4,300-digit limit (PyYAML's int())
        raise ConfigError(f"{path}: not usable YAML ({str(e).split(';')[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of key: value at the top level")
    return data


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation: `Container`, `Container | None`, `Power | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for a in typing.get_args(annotation):
            m = _model_of(a)
            if m is not None:
                return m
    return None


def model_at(model: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, Any]:
    """(the model holding the last part of `loc`, its FieldInfo or None): nested models are
    walked through `X | None` too, so an unknown key is matched against the keys of its own level."""
    sub: type[BaseModel] | None = model
    for part in loc[:-1]:
        field = sub.model_fields.get(str(part)) if sub is not None else None
        sub = _model_of(field.annotation) if field is not None else None
        if sub is None:
            return None, None
    if sub is None or not loc:
        return sub, None
    return sub, sub.model_fields.get(str(loc[-1]))


def validation_message(err: ValidationError, model: type[BaseModel], source: str) -> str:
    """First pydantic error as `source: field 'x': problem`, with the closest valid key."""
    # An unknown key usually explains a "missing" one (a typo), so report it first.
    errs = sorted(err.errors(), key=lambda x: x["type"] != "extra_forbidden")
    e = errs[0]
    loc = ".".join(str(p) for p in e["loc"])
    if e["type"] == "extra_forbidden":
        owner, _ = model_at(model, e["loc"])  # suggest from the key's own level
        keys = list(owner.model_fields) if owner is not None else []
        return f"{source}: unknown key '{loc}'{suggest(str(e['loc'][-1]), keys)}"
    if not loc:  # a check across fields (a model validator): its message names them
        return f"{source}: {e['msg'].removeprefix('Value error, ')}"
    return f"{source}: field '{loc}': {e['msg']}"


def validate[M: BaseModel](model: type[M], data: dict[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(validation_message(err, model, source)) from None
