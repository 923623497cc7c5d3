"""`mlperf check`: the official mlperf-logging checkers over a log, a folder of logs, a result folder,
a submitter folder or a whole submission tree, with every finding explained in one line.

    log.py       one log through the compliance checker (tiny logs get the tiny rules)
    official.py  the compliance checker as the package runs it, without its slow parse and YAML reads
    tree.py      result folders and submitter trees: the package and RCP checkers (package.py: their
                 findings) and the system-description checker (systems.py)
    messages.py  the official tools' messages turned into findings (what, where, how to fix)

The ruleset of each log and folder is `--ruleset` or inferred (core/rulesets.py) and reported with
its verdict. Logs and result folders are checked in parallel over the cores (review/pool.py).
Torch-free; never modifies the tree it reads (the package checker runs on a symlinked mirror).
"""

from __future__ import annotations

# The names below load on first use (PEP 562), so that scoring, which needs only check.official,
# does not import the checkers' message tables and the tree code.
__all__ = ["Finding", "LogResult", "Report", "check_log", "check_path", "validate_ruleset"]


def __getattr__(name: str):
    if name == "check_path":
        from harness.review.check.path import check_path

        return check_path
    if name in ("check_log", "LogResult", "Report"):
        from harness.review.check import log

        return getattr(log, name)
    if name == "Finding":
        from harness.review.check.messages import Finding

        return Finding
    if name == "validate_ruleset":
        from harness.core import rulesets as rules

        return getattr(rules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
