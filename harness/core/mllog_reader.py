"""The one reader of `:::MLLOG` lines: scoring, checking, progress, resume and diagnose all use it.

It reads lines the way mlperf-logging 4.1.68's parser does
(`compliance_checker/mlp_parser/ruleset_400.py`), so what we read is what the official tools read:
- text decoded as latin-1 (never fails on binary junk or non-UTF-8), universal newlines;
- a line counts if it contains `:::MLLOG ` anywhere; everything before the *last* occurrence is
  dropped (prefixes such as `0: [rank0] ` or raw job output are fine);
- the rest is JSON with `time_ms`, `key`, `value`, `metadata` (all four required; `metadata` an
  object, which every reader of ours indexes).
Nothing here raises for file contents: a bad line is a `(None, why)` from `parse_record`.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.files import open_input

TOKEN = ":::MLLOG "
REQUIRED = ("time_ms", "key", "value", "metadata")


def record_text(line: str) -> str | None:
    """The JSON text after the last token of a line, or None when the line has no token."""
    i = line.rfind(TOKEN)
    return None if i < 0 else line[i + len(TOKEN) :].strip()


def parse_record(text: str) -> tuple[dict | None, str | None]:
    """(record, None) or (None, why) for the JSON after the token; never raises.
    A string `time_ms` becomes a float (as the official parser does); numbers stay as written."""
    try:
        m = json.loads(text)
    except ValueError as e:
        return None, f"not valid JSON ({e})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    if not isinstance(m, dict):
        return None, f"the JSON is a {type(m).__name__}, not an object"
    missing = [k for k in REQUIRED if k not in m]
    if missing:
        return None, "missing " + ", ".join(f"'{k}'" for k in missing)
    if not isinstance(m["time_ms"], (int, float)) or isinstance(m["time_ms"], bool):
        try:
            m["time_ms"] = float(m["time_ms"])
        except (TypeError, ValueError):
            return None, f"time_ms {m['time_ms']!r} is not a number"
    if not isinstance(m["key"], str):
        return None, "key is not a string"
    if not isinstance(m["metadata"], dict):  # every reader indexes it (no published log has another)
        return None, f"metadata is a {type(m['metadata']).__name__}, not an object"
    return m, None


def iter_token_lines(path: str | Path):
    """Yield (file line number, mllog index, the line from its last token on, right-stripped):
    the very string mlperf-logging's parser hands to `string_to_logline` (its
    `re.sub('.*:::MLLOG ', ...)` keeps the same text, in time quadratic in the line length).
    Raises OSError when the file cannot be opened or read (callers turn it into a problem)."""
    idx = 0
    with open_input(path, encoding="latin-1") as f:
        for n, line in enumerate(f, 1):
            i = line.rfind(TOKEN)
            if i < 0:
                continue
            yield n, idx, line[i:].rstrip()
            idx += 1


def iter_mllog(path: str | Path):
    """Yield (file line number, mllog index, text after the token) for every MLLOG line.
    Raises OSError when the file cannot be opened or read (callers turn it into a problem)."""
    for n, idx, line in iter_token_lines(path):
        yield n, idx, line[len(TOKEN) :].strip()


def events_of(lines) -> list[dict]:
    """The well-formed records among `lines` (str or bytes); malformed ones are skipped."""
    out = []
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("latin-1")
        text = record_text(line)
        if text is not None:
            rec, _ = parse_record(text)
            if rec is not None:
                out.append(rec)
    return out


def read_new_events(path: str | Path, offset: int) -> tuple[list[dict], int]:
    """Records appended to a (growing) log since byte `offset`, complete lines only, and the new
    offset. A missing file is no events yet."""
    try:
        with open_input(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    return events_of(chunk[:end].splitlines()), offset + end


def read_events(path: str | Path) -> list[dict]:
    """Every well-formed record of a log, in file order (a torn last line is ignored)."""
    return read_new_events(path, 0)[0]


def header_value(path: str | Path, key: str, lines: int = 80):
    """The value of `key` among the first `lines` MLLOG records of a log (the header), or None;
    never raises (an unreadable file has no header)."""
    try:
        for _n, idx, text in iter_mllog(path):
            if idx >= lines:
                break
            rec, _ = parse_record(text)
            if rec is not None and rec.get("key") == key:
                return rec.get("value")
    except (OSError, UnicodeError):
        return None
    return None
