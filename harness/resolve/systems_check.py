"""Every problem of a descriptor as one line each (`mlperf systems validate`): pydantic collects all
field errors in one pass (`ValidationError.errors()`); this turns each into `source: field: problem;
fix`. core/schema.py's validation_message keeps the first only (one line for `mlperf run`)."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.core.errors import suggest


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


def _walk(model: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, Any]:
    """(the model holding the last part of `loc`, its FieldInfo or None)."""
    sub: type[BaseModel] | None = model
    for part in loc[:-1]:
        field = sub.model_fields.get(str(part)) if sub is not None else None
        sub = _model_of(field.annotation) if field is not None else None
        if sub is None:
            return None, None
    if sub is None or not loc:
        return sub, None
    return sub, sub.model_fields.get(str(loc[-1]))


def _meaning(field: Any) -> str:
    doc = " ".join((getattr(field, "description", None) or "").split())
    first = re.split(r"(?<!e\.g)(?<!i\.e)\. ", doc)[0].rstrip(".")  # its first sentence
    return f" ({first})" if first else ""


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def messages(err: ValidationError, model: type[BaseModel], source: str) -> list[str]:
    """One line per error, unknown keys first (a typo there usually explains a 'missing' field)."""
    errs = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
    out = []
    meant: set[tuple] = set()  # the keys misspelled ones stand for: their 'missing' is the same mistake
    for e in errs:
        loc = ".".join(str(p) for p in e["loc"])
        owner, field = _walk(model, e["loc"])
        if e["type"] == "extra_forbidden":
            keys = list(owner.model_fields) if owner is not None else []
            fix = suggest(str(e["loc"][-1]), keys)
            if fix:
                meant.add((*e["loc"][:-1], fix.split("'")[1]))
            else:
                fix = f" (no such key here; valid: {', '.join(keys)})"
            out.append(f"{source}: unknown key '{loc}'{fix}")
        elif e["type"] == "missing" and tuple(e["loc"]) in meant:
            continue
        elif e["type"] == "missing":
            out.append(f"{source}: field '{loc}' is required: add it{_meaning(field)}")
        elif not loc:  # a check across fields (model validator): its message says what to change
            out.append(f"{source}: {e['msg'].removeprefix('Value error, ')}")
        elif e["type"] == "value_error":  # our own checks: their message names the value and the fix
            out.append(f"{source}: field '{loc}': {e['msg'].removeprefix('Value error, ')}")
        else:
            out.append(f"{source}: field '{loc}': {e['msg']}, got {_got(e.get('input'))}{_meaning(field)}")
    return out
