"""The cross-checks a review committee makes by hand on one result folder (issue 46), which no
official tool makes: do the runs' logs say they belong to this submission?

    org/results/<system>/<benchmark>/result_<i>.txt   beside   org/systems/<system>.json

- the runs of a folder name one `submission_org`, `submission_division` and `submission_platform`:
  a log that names another than the others is an error naming both (a foreign log dropped in);
- the logs' `submission_division` is the system JSON's `division`: else an error naming both;
- the logs' `submission_org` is the submitter folder's name or the system JSON's `submitter`
  (compared without case, spaces and punctuation): else a warning naming both (published folders
  do differ: a university's runs of a vendor's code still logging the vendor).
Folder-level findings: the logs themselves stay as the compliance checker judged them.
"""

from __future__ import annotations

import os
import re

from harness.core.tree import header_groups
from harness.review.check.messages import Finding

KEYS = ("submission_org", "submission_division", "submission_platform")


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def _odd_ones(groups: dict[str, list[str]]) -> tuple[str, list[str], str] | None:
    """(the value most runs log, the files logging another, those values) where the runs disagree."""
    if len(groups) < 2:
        return None
    common = max(groups, key=lambda v: (len(groups[v]), v))
    odd = sorted(f for v, files in groups.items() if v != common for f in files)
    others = ", ".join(sorted(repr(v) for v in groups if v != common))
    return common, odd, others


def cross_check(org: str, result_dir: str, desc: dict | None, display_dir: str) -> list[Finding]:
    out: list[Finding] = []
    values: dict[str, str] = {}
    for key in KEYS:
        groups = header_groups(result_dir, key)
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
