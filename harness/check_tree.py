"""Submission-tree checks for `mlperf check` (package, system-description, seed and RCP checkers)."""

from __future__ import annotations

import os


def find_orgs(path: str) -> list[str]:
    """Submitter folders (with systems/ and results/) at or directly under `path`."""

    def is_org(p):
        return os.path.isdir(os.path.join(p, "results")) and os.path.isdir(os.path.join(p, "systems"))

    return []  # tree checks land in the next commit


def check_tree(path, orgs, ruleset):
    raise NotImplementedError
