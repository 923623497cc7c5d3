"""`mlperf check`: the official MLPerf checkers over a log, a folder of logs or a submission tree.

What runs (mlperf-logging 4.1.68, in-process, never re-encoding a rule):
- every log: the compliance checker (`mlp_compliance`), with the official rules of `--ruleset`
  or of the ruleset inferred for it (core/rulesets.py: the round in its path, its benchmark, else
  4.0.0; our own logs name theirs, `harness_ruleset`; each verdict names its ruleset and why) or,
  for our tiny logs (`harness_size: tiny`), that ruleset's tiny rules (benchmarks/tiny_rules.py:
  its own files with the size-dependent numbers changed);
- a submission tree (`<org>/systems/*.json` + `<org>/results/<system>/<benchmark>/`): see
  `tree.py` (package, system-description, seed and RCP checkers).

Surviving what crashes the official tools: the checker runs inside try/except per file with the
module global `enqueued_configs` reset first, its logging/stdout/warnings captured; a pre-scan of
each log (harness.review.results.parse) locates lines the official parser cannot take: a missing
`metadata`/`time_ms`/`key`/`value` (uncaught KeyError there), a non-object JSON line (TypeError),
and MLLOG lines over 32 KB (its `re.sub('.*:::MLLOG ', ...)` is quadratic in the line length:
a 10 MB line would take hours), unreadable files (symlink loops, directories, permissions).
Every finding is one line: file, line, what the checker said, and a plain-English fix. The full
checker text is kept in `--json` (`detail`), so nothing the official tools say is hidden.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
import warnings
from dataclasses import asdict, dataclass, field

from harness.core import rulesets as rules
from harness.core.files import is_special, open_input
from harness.core.mllog_reader import TOKEN
from harness.review.check import messages, official
from harness.review.check.messages import Finding, Scan

SCHEMA_VERSION = 1
LOG_SUFFIXES = (".txt", ".log")


@dataclass
class LogResult:
    path: str
    rules: str  # rule file the checker started from
    passed: bool
    crashed: bool = False
    tiny: bool = False
    benchmark: str | None = None
    division: str | None = None
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    ruleset: str | None = None  # the ruleset the verdict used
    ruleset_source: str | None = None  # why that one: --ruleset, round folder 'v5.0', benchmark, default


# ------------------------------------------------------------------------------------------
# running the official compliance checker in-process


@contextlib.contextmanager
def captured_official_output():
    """Capture what the official tools log, print and warn; yields (records, stdout, warnings)."""
    records: list[tuple[str, str]] = []

    class _Handler(logging.Handler):
        def emit(self, record):
            try:
                records.append((record.levelname, record.getMessage()))
            except Exception:  # noqa: BLE001 - a bad format string must not kill the check
                records.append((record.levelname, str(record.msg)))

    root = logging.getLogger()
    handler = _Handler(level=logging.INFO)
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            yield records, out, warned
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def tiny_rules_path(ruleset: str) -> str:
    """The ruleset's tiny rules (benchmarks/tiny_rules.py), imported only for a tiny log: pydantic
    is slow to load."""
    from benchmarks.tiny_rules import config_path

    return config_path(ruleset)


def rules_for(scan: Scan, ruleset: str) -> tuple[str, bool]:
    tiny = scan.first_value.get("harness_size") == "tiny"
    if tiny:
        from benchmarks.tiny_rules import our_names

        if our_names(ruleset):
            return tiny_rules_path(ruleset), tiny
    return f"training_{ruleset}/common.yaml", tiny


def _compliance_error(display: str, message: str, fix: str, detail: str = "") -> Finding:
    """A finding of the official compliance checker's, as this harness words it."""
    return Finding(display, None, "compliance", "error", message, fix, detail=detail)


def _harness_error(res: LogResult, message: str, fix: str, line: int | None = None) -> None:
    """A finding the harness itself makes (the official checker never saw the file or line)."""
    res.findings.append(Finding(res.path, line, "harness", "error", message, fix))


def check_log(
    path: str | os.PathLike,
    ruleset: str | None = None,
    display: str | None = None,
    *,
    round_name: str | None = None,
    source: str | None = None,
) -> LogResult:
    """Run the official compliance checker on one log. Never raises for the file's contents.
    Without `ruleset` it is inferred (rules.for_benchmark); `source` says why a given one applies."""
    path = os.fspath(path)
    display = display or path
    t0 = time.perf_counter()
    if is_special(path):
        res = LogResult(path=display, rules="", passed=False)
        _harness_error(res, "not a regular file (a FIFO, socket or device)", "replace it with the log file")
        return _done(res, t0)
    scan = messages.scan(path)
    bench = scan.first_value.get("submission_benchmark")
    own = scan.first_value.get("harness_ruleset")
    if not ruleset and not round_name and isinstance(own, str) and own in rules.rulesets():
        ruleset, source = own, "the log's harness_ruleset"  # our runs name the rules they ran under
    if ruleset and source:
        how, note = source, None
    elif isinstance(bench, str) and bench in rules.all_benchmarks():
        ruleset, how, note = rules.for_benchmark(bench, ruleset, round_name=round_name, path=path)
    else:
        (ruleset, how), note = rules.resolve(ruleset, round_name=round_name, path=path), None
    config, tiny = rules_for(scan, ruleset)
    res = LogResult(path=display, rules=config, passed=False, tiny=tiny, ruleset=ruleset, ruleset_source=how)
    if note:
        res.findings.append(Finding(display, None, "harness", "warning", note, "pass --ruleset to choose"))
    res.benchmark = scan.first_value.get("submission_benchmark")
    res.division = scan.first_value.get("submission_division")
    if scan.error:
        _harness_error(
            res,
            f"cannot read the file: {scan.error}",
            "point at a readable log file (a broken or looping symlink, a directory or a permission problem)",
        )
        return _done(res, t0)
    if scan.too_long:
        for n, length in scan.too_long[:3]:
            _harness_error(
                res,
                f"MLLOG line of {length:,} characters: not passed to the official checker, whose parser "
                "takes time quadratic in the line length (hours for megabytes)",
                "MLPerf lines are a few hundred bytes: remove the line or the junk that was written into it",
                line=n,
            )
        res.crashed = True
        return _done(res, t0)
    fatal = [(n, why) for n, why, is_fatal in scan.bad if is_fatal]
    if tiny and isinstance(res.benchmark, str) and res.benchmark.isidentifier():
        chained = os.path.join(os.path.dirname(config), res.benchmark, "tiny_rules.yaml")
        if not os.path.isfile(chained):  # the checker would crash opening it
            _harness_error(
                res,
                f"tiny log of '{res.benchmark}', which is not one of our benchmarks in ruleset {ruleset}: "
                "no tiny rules for it",
                "check it under a ruleset that lists it (--ruleset), or check a full-size log",
            )
            return _done(res, t0)

    from mlperf_logging.compliance_checker import mlp_compliance

    mlp_compliance.enqueued_configs.clear()  # leftovers from a previous file (or a crash) chain on
    checker = mlp_compliance.make_checker("training", ruleset, False, False)
    crash = None
    with captured_official_output() as (records, out, _warned):
        try:
            valid = official.check_file(checker, path, config)
        except Exception as e:  # noqa: BLE001 - the official checker's crashes become findings
            valid, crash = False, e
    mlp_compliance.enqueued_configs.clear()
    raw = "\n".join(f"{lvl} - {msg}" for lvl, msg in records) + out.getvalue()
    res.passed = bool(valid) and crash is None

    for msg in checker.warnings.values():
        res.findings.append(messages.explain(msg, "warning", scan, display))
    errors = list(checker.overwritable.values()) + list(checker.not_overwritable)
    cut = _cut_line(path)
    for msg in errors:
        if msg.strip() == "Log lines had parsing errors.":
            for n, why, _f in scan.bad:
                if not _f:
                    res.findings.append(
                        Finding(
                            display,
                            n,
                            "compliance",
                            "error",
                            f"the log is truncated: its last line stops mid-record ({why})"
                            if n == cut
                            else f"Log lines had parsing errors: {why}",
                            "the file was cut (a full disk, a killed copy?): take the whole log from the run "
                            "folder; what the checker misses after the cut is reported below"
                            if n == cut
                            else "the JSON after ':::MLLOG ' is broken (a truncated or interleaved write?): repair "
                            "or delete the line",
                            detail=msg,
                        )
                    )
            if not any(not f for _n, _w, f in scan.bad):
                res.findings.append(
                    _compliance_error(
                        display,
                        msg.strip(),
                        "repair the lines the checker could not parse",
                        detail=raw,
                    )
                )
            continue
        res.findings.append(messages.explain(msg, "error", scan, display))
    if not scan.file_line and crash is None:
        # nothing to check: one finding instead of one per missing key (all kept in `detail`)
        res.findings = [
            _compliance_error(
                display,
                f"No log lines detected ({len(res.findings) - 1} required keys missing as a result)",
                "the file has no ':::MLLOG ' lines: it is empty, truncated or not an MLPerf log",
                detail="\n".join(f.detail for f in res.findings),
            )
        ]
    res.findings += messages.interval_findings(scan, display)
    if crash is not None:
        res.crashed = True
        res.findings.append(messages.explain_crash(crash, fatal, scan, display, raw))
    elif not res.passed and not errors:
        res.findings.append(
            _compliance_error(
                display,
                "FAILED (no message)",
                "read the checker's output in --json 'detail'",
                detail=raw,
            )
        )
    return _done(res, t0)


def _cut_line(path: str) -> int | None:
    """The 1-based number of the file's last line when it has no line end (a cut file), else None."""
    try:
        with open_input(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data or data.endswith(b"\n"):
        return None
    return data.count(b"\n") + 1


def _first(f: Finding) -> int:
    """Cause order: a cut or unparsable line comes before what it makes missing (run_stop, ...)."""
    return 0 if f.message.startswith(("the log is truncated", "Log lines had parsing errors")) else 1


def _done(res: LogResult, t0: float) -> LogResult:
    res.findings.sort(key=_first)  # stable: the checker's order otherwise
    res.seconds = round(time.perf_counter() - t0, 4)
    if any(f.severity == "error" for f in res.findings):
        res.passed = False
    return res


# ------------------------------------------------------------------------------------------
# paths -> report


@dataclass
class Report:
    path: str
    ruleset: str
    kind: str  # log | logs | tree
    logs: list[LogResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # tree-level (package, systems, rcp, ...)
    # about the whole check, said before anything else: the ruleset guessed for a tree, logs that
    # look older than the ruleset nobody pinned (older.py)
    head: list[Finding] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)  # what ran: {"tool", "target", "passed", ...}
    skipped: list[str] = field(default_factory=list)  # files in a folder without MLLOG lines
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.logs) and not any(
            f.severity == "error" for f in self.head + self.findings
        )

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 4

    def all_findings(self) -> list[Finding]:
        """In cause order: the check as a whole, each log, then the folders (package, power,
        cross-checks), whose findings mostly follow from the logs'."""
        return self.head + [f for r in self.logs for f in r.findings] + self.findings

    def root(self) -> str:
        """The folder that paths in `--json`'s `all_findings` are relative to."""
        return os.path.abspath(self.path if os.path.isdir(self.path) else os.path.dirname(self.path))

    def relative(self, shown: str) -> str:
        """A finding's file as relative to root(): tree findings are shown relative to the root
        already, those of a folder of logs relative to the working directory (where the user is)."""
        real = (
            shown
            if os.path.isabs(shown)
            else os.path.join(self.root() if self.kind == "tree" else os.getcwd(), shown)
        )
        return os.path.relpath(real, self.root())

    def failure_line(self) -> str | None:
        """The contract's one line for exit 4: how much failed and the first error with its file
        (None when everything passed). `mlperf check` ends stderr with it, so a CI log that shows
        only stderr still says what is wrong and where."""
        if self.passed:
            return None
        errors = [f for f in self.all_findings() if f.severity == "error"]
        failing = [r for r in self.logs if not r.passed]
        counts = f"{len(errors)} errors, {len(failing)} of {len(self.logs)} logs failing"
        if errors:
            first = errors[0]
            where = f"{first.file}:{first.line}" if first.line else first.file
            return f"check failed ({counts}); first: {where}: [{first.tool}] {first.message}"
        return f"check failed ({counts}); first: {failing[0].path}"

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "path": self.path,
            "ruleset": self.ruleset,
            "kind": self.kind,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "logs": [asdict(r) for r in self.logs],
            "findings": [asdict(f) for f in self.head + self.findings],
            # every finding in one list, in cause order, `file` relative to the checked folder
            "all_findings": [{**asdict(f), "file": self.relative(f.file)} for f in self.all_findings()],
            "tools": self.tools,
            "skipped": self.skipped,
            "counts": {
                "logs": len(self.logs),
                "logs_failed": sum(not r.passed for r in self.logs),
                "errors": sum(f.severity == "error" for f in self.all_findings()),
                "warnings": sum(f.severity == "warning" for f in self.all_findings()),
            },
        }


def log_files(folder: str) -> list[str]:
    """Log files under a folder: *.txt / *.log, recursively, not following symlinked folders."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            p = os.path.join(dirpath, fn)
            if fn.endswith(LOG_SUFFIXES) and not fn.startswith(".") and not is_special(p):
                out.append(p)
    return out


def has_mllog(path: str) -> bool:
    """Whether the file contains ':::MLLOG ' anywhere (read in chunks; unreadable -> True, so the
    check reports why it cannot be read)."""
    tail = b""
    token = TOKEN.encode()
    try:
        with open_input(path, "rb") as f:
            while chunk := f.read(1 << 20):
                if token in tail + chunk:
                    return True
                tail = chunk[-len(token) :]
    except OSError:
        return True
    return False


def display_path(p: str, base: str) -> str:
    try:
        r = os.path.relpath(p, base)
        return p if r.startswith("..") else r
    except ValueError:
        return p
