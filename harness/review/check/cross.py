"""The cross-checks a review committee makes by hand on one result folder (issue 46), which no
official tool makes: do the runs' logs say they belong to this submission?

    org/results/<system>/<benchmark>/result_<i>.txt   beside   org/systems/<system>.json

- the runs of a folder name one `submission_org`, `submission_division` and `submission_platform`:
  a log that names another than the others is an error naming both (a foreign log dropped in);
- the logs' `submission_division` is the system JSON's `division`: else an error naming both;
- the logs' `submission_org` is the submitter folder's name or the system JSON's `submitter`
  (compared without case, spaces and punctuation): else a warning naming both (published folders
  do differ: a university's runs of a vendor's code still logging the vendor).
- the node count a log's `submission_platform` starts with (`64xNVIDIA DGX H100`, the form
  NVIDIA's and this harness's logs use) is the system JSON's `number_of_nodes`: else an error
  naming both (platforms without the prefix are not compared);
- every key the runs log before run_start is the same in every run, except the seed and
  measurements (`tracked_stats`, `cache_clear`) and this harness's own keys: a run with another
  batch size or learning rate is an error in closed (the runs of a result are one configuration;
  published folders differ only in those keys), a warning in open.
Folder-level findings: the logs themselves stay as the compliance checker judged them.
"""

from __future__ import annotations

import json
import os
import re

from harness.core.mllog_reader import iter_mllog, parse_record
from harness.core.tree import result_files
from harness.review.check.messages import Finding

KEYS = ("submission_org", "submission_division", "submission_platform")
PER_RUN = ("seed", "tracked_stats", "cache_clear")  # what runs of one configuration log differently
_NODES = re.compile(r"(\d+)x\S")


def headers(result_dir: str) -> dict[str, dict]:
    """{result file name: {key: first value}} of the POINT_IN_TIME records before run_start
    (the run's configuration); an unreadable log has none (the compliance check says why)."""
    out: dict[str, dict] = {}
    for f in result_files(result_dir):
        head: dict = {}
        try:
            for _n, _idx, text in iter_mllog(f):
                rec, _ = parse_record(text)
                if rec is None:
                    continue
                if rec["key"] == "run_start":
                    break
                if rec.get("event_type") == "POINT_IN_TIME":
                    head.setdefault(rec["key"], rec["value"])
        except (OSError, UnicodeError):
            head = {}
        out[os.path.basename(f)] = head
    return out


def _groups(heads: dict[str, dict], key: str) -> dict[str, list[str]]:
    """{value as JSON: [files]} of `key` over the runs that log it."""
    out: dict[str, list[str]] = {}
    for name, head in heads.items():
        if key in head:
            out.setdefault(json.dumps(head[key], sort_keys=True), []).append(name)
    return out


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def _odd_ones(groups: dict[str, list[str]], show=repr) -> tuple[str, list[str], str] | None:
    """(the value most runs log, the files logging another, those values) where the runs disagree."""
    if len(groups) < 2:
        return None
    common = max(groups, key=lambda v: (len(groups[v]), v))
    odd = sorted(f for v, files in groups.items() if v != common for f in files)
    others = ", ".join(sorted(show(v) for v in groups if v != common))
    return common, odd, others


def cross_check(org: str, result_dir: str, desc: dict | None, display_dir: str) -> list[Finding]:
    out: list[Finding] = []
    values: dict[str, str] = {}
    heads = headers(result_dir)
    for key in KEYS:
        groups = {
            json.loads(v): fs for v, fs in _groups(heads, key).items() if isinstance(json.loads(v), str)
        }
        odd = _odd_ones(groups)
        if odd:
            common, files, others = odd
            out.append(
                Finding(
                    display_dir,
                    None,
                    "harness",
                    "error",
                    f"{', '.join(files)} log {key} {others}; the other runs of this folder log {common!r}",
                    "a result folder holds one submission's runs: move the other submission's logs out "
                    "(renumber from result_0.txt) or correct the key",
                )
            )
        if groups:
            values[key] = max(groups, key=lambda v: len(groups[v]))
    division = values.get("submission_division")
    if desc is not None and division and desc.get("division") and division != desc.get("division"):
        out.append(
            Finding(
                display_dir,
                None,
                "harness",
                "error",
                f"the logs say submission_division {division!r}, the system JSON says division "
                f"{desc.get('division')!r}",
                "one submission has one division: correct the system JSON or check the logs under their own",
            )
        )
    out += _configuration(heads, values.get("submission_division"), display_dir)
    nodes = _NODES.match(values.get("submission_platform", ""))
    want = desc.get("number_of_nodes") if desc else None
    if nodes and isinstance(want, int) and not isinstance(want, bool) and int(nodes[1]) != want:
        out.append(
            Finding(
                display_dir,
                None,
                "harness",
                "error",
                f"the logs say submission_platform {values['submission_platform']!r} ({nodes[1]} nodes), "
                f"the system JSON says number_of_nodes {want}",
                "the runs of a system folder ran on that system: correct the JSON or move the logs to "
                "the system they ran on",
            )
        )
    logged_org = values.get("submission_org")
    folder_org = os.path.basename(os.path.abspath(org))
    names = [folder_org] + ([desc["submitter"]] if desc and isinstance(desc.get("submitter"), str) else [])
    if logged_org and _norm(logged_org) not in {_norm(n) for n in names}:
        out.append(
            Finding(
                display_dir,
                None,
                "harness",
                "warning",
                f"the logs say submission_org {logged_org!r}; the submitter folder is {folder_org!r}"
                + (f" and the system JSON's submitter {desc['submitter']!r}" if len(names) > 1 else ""),
                "log the submitting organization (or say why another one is named)",
            )
        )
    return out


def _configuration(heads: dict[str, dict], division: str | None, display_dir: str) -> list[Finding]:
    """A key of the runs' configuration whose value differs between runs: one finding per key."""
    out = []
    keys = sorted({k for h in heads.values() for k in h})
    for key in keys:
        if key in KEYS or key in PER_RUN or key.startswith("harness_"):
            continue
        odd = _odd_ones(_groups(heads, key), show=str)  # values as JSON: 64, "adamw"
        if odd:
            common, files, others = odd
            out.append(
                Finding(
                    display_dir,
                    None,
                    "harness",
                    "error" if division == "closed" else "warning",
                    f"{', '.join(files)} log {key} {others}; the other runs of this folder log {common}",
                    "the runs of one result share one configuration (only the seed differs): rerun "
                    "them with it, or move them to a result of their own",
                )
            )
    return out
