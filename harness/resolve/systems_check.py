"""Every problem of a descriptor as one line each (`mlperf systems validate`): pydantic collects all
field errors in one pass (`ValidationError.errors()`); this turns each into `source: field: problem;
fix`. core/schema.py's validation_message keeps the first only (one line for `mlperf run`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.core.errors import suggest
from harness.core.schema import model_at


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
        owner, field = model_at(model, e["loc"])
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
