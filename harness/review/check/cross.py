"""The cross-checks a review committee makes by hand on one result folder (issue 46), which no
official tool makes: do the runs' logs say they belong to this submission?

    org/results/<system>/<benchmark>/result_<i>.txt   beside   org/systems/<system>.json

- runs apart: every key the runs log before run_start is what most runs of the folder log, except
  the seed and measurements (`tracked_stats`, `cache_clear`) and this harness's own keys. A run
  that differs is one finding listing each key with both values, who first: another
  `submission_org`/`division`/`platform` is an error (a foreign log dropped in), another batch
  size or learning rate an error in closed (published folders differ only in the excepted keys),
  a warning in open;
- logs apart from the system JSON, one finding: their `submission_division` against its
  `division`, the node count their `submission_platform` starts with (`64xNVIDIA DGX H100`, the
  form NVIDIA's and this harness's logs use; others are not compared) against `number_of_nodes`;
- the logs' `submission_org` is the submitter folder's name or the system JSON's `submitter`
  (compared without case, spaces and punctuation): else a warning naming both (published folders
  do differ: a university's runs of a vendor's code still logging the vendor).
Folder-level findings: the logs themselves stay as the compliance checker judged them.
"""

from __future__ import annotations

import json
import os
import re

from harness.core import rulesets as rules
from harness.core.mllog_reader import iter_mllog, parse_record
from harness.core.tree import result_files
from harness.review.check.messages import Finding

KEYS = ("submission_org", "submission_division", "submission_platform", "submission_benchmark")
"""Who a run says it is: a run apart in one of these is another submission's (an error)."""
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


def _common(groups: dict[str, list[str]]) -> str:
    """The value (as JSON) most runs log: the folder's claim (ties: the larger JSON text)."""
    return max(groups, key=lambda v: (len(groups[v]), v))


def cross_check(org: str, result_dir: str, desc: dict | None, display_dir: str) -> list[Finding]:
    """The folder's cross-checks, one finding per cause: a run (or runs) apart from the others,
    the logs apart from the system JSON, the logs' org apart from the folder's."""
    heads = headers(result_dir)
    values: dict[str, str] = {}
    for key in KEYS:  # what most runs say: the folder's claim
        groups = _groups(heads, key)
        if groups:
            common = json.loads(_common(groups))
            if isinstance(common, str):
                values[key] = common
    out = _runs_apart(heads, values.get("submission_division"), display_dir)
    folder = rules.benchmark_alias(os.path.basename(result_dir))
    logged = values.get("submission_benchmark")
    if logged and folder in rules.all_benchmarks() and logged not in rules.linked(folder) + [folder]:
        out.append(
            Finding(
                display_dir,
                None,
                "harness",
                "error",
                f"the logs say submission_benchmark {logged!r}; the folder is {folder!r}",
                "a result folder is named after its benchmark: move the logs to <system>/" + logged,
            )
        )
    out += _system_apart(values, desc, display_dir)
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


def _runs_apart(heads: dict[str, dict], division: str | None, display_dir: str) -> list[Finding]:
    """Runs whose submission_* or configuration keys differ from what most runs of the folder log:
    one finding per set of runs that differ alike (a foreign log: its org, platform, learning
    rate, ... in one line), an error for another submission's keys or a closed configuration."""
    said: dict[str, list[str]] = {}  # file -> ["key value (the others: value)", ...]
    foreign: set[str] = set()
    for key in sorted({k for h in heads.values() for k in h}, key=lambda k: (k not in KEYS, k)):  # who first
        if key in PER_RUN or key.startswith("harness_"):
            continue
        groups = _groups(heads, key)
        if len(groups) < 2:
            continue
        common = _common(groups)
        for value, files in groups.items():
            if value != common:
                for f in files:
                    said.setdefault(f, []).append(f"{key} {value} (the others {common})")
                    foreign |= {f} if key in KEYS else set()
    alike: dict[tuple, list[str]] = {}
    for f, diffs in said.items():
        alike.setdefault((f in foreign, tuple(diffs)), []).append(f)
    out = []
    for (is_foreign, diffs), files in alike.items():
        out.append(
            Finding(
                display_dir,
                None,
                "harness",
                "error" if is_foreign or division == "closed" else "warning",
                f"{', '.join(sorted(files))} differ{'s' if len(files) == 1 else ''} from the other runs of "
                f"this folder: {'; '.join(diffs)}",
                "a result folder holds one submission's runs: move the other submission's logs out "
                "(renumber from result_0.txt) or correct the keys"
                if is_foreign
                else "the runs of one result share one configuration (only the seed differs): rerun "
                "them with it, or move them to a result of their own",
            )
        )
    return out


def _count(value) -> int | None:
    """A system JSON count: the official files write strings ("64"); ints are taken too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() and len(value) < 10 else None


def _system_apart(values: dict[str, str], desc: dict | None, display_dir: str) -> list[Finding]:
    """The logs' division and node count against the system JSON's: one finding naming both."""
    if desc is None:
        return []
    apart = []
    division = values.get("submission_division")
    if division and desc.get("division") and division != desc.get("division"):
        apart.append(f"submission_division {division!r} vs division {desc.get('division')!r}")
    nodes = _NODES.match(values.get("submission_platform", ""))
    want = _count(desc.get("number_of_nodes"))
    if nodes and want is not None and int(nodes[1]) != want:
        apart.append(
            f"submission_platform {values['submission_platform']!r} ({nodes[1]} nodes) vs number_of_nodes {want}"
        )
    if not apart:
        return []
    return [
        Finding(
            display_dir,
            None,
            "harness",
            "error",
            f"the logs and the system JSON disagree: {'; '.join(apart)}",
            "one submission is one system: correct the system JSON, or move the logs to the system "
            "they ran on (and check them under their own division)",
        )
    ]
