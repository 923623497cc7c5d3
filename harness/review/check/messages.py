"""Where each MLLOG line is, what would crash the official parser, and how checker messages
become one-line findings with a plain-English fix (used by log.py and tree.py).

A message of the compliance checker is matched by its fixed wording (mlperf-logging 4.1.68,
`compliance_checker/mlp_compliance.py`); anything unrecognised is still reported, with its first
line as the message and the full text in `detail`.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field

from harness.core.files import open_input
from harness.core.mllog_reader import TOKEN, parse_record

MAX_LINE = 32 * 1024  # longest MLLOG line handed to the official parser (quadratic regex there)


@dataclass
class Finding:
    file: str
    line: int | None  # 1-based line in the file, when the finding is about one line
    tool: str  # compliance | package | system-desc | seed | rcp | harness
    severity: str  # error | warning
    message: str  # what the official tool said (its first lines, condensed)
    fix: str  # what to do about it, in plain English
    detail: str = ""  # the tool's full text

    def one_line(self, file: str | None = None) -> str:
        """`file: severity: [tool] message -- fix: fix`; `file` shows another path for it (relative
        to a folder that heads a group of findings), "" none."""
        file = self.file if file is None else file
        where = f"{file}:{self.line}: " if self.line and file else (f"{file}: " if file else "")
        return f"{where}{self.severity}: [{self.tool}] {self.message} -- fix: {self.fix}"


# ------------------------------------------------------------------------------------------
# pre-scan: where each MLLOG line is, and what would crash the official parser


@dataclass
class Scan:
    file_line: list[int] = field(default_factory=list)  # MLLOG index -> 1-based file line
    text: list[str] = field(default_factory=list)  # stripped text after the token (short lines)
    keys: dict = field(default_factory=dict)  # key -> [MLLOG index, ...]
    first_value: dict = field(default_factory=dict)
    bad: list = field(default_factory=list)  # (file line, why, fatal) fatal = crashes the checker
    too_long: list = field(default_factory=list)  # (file line, length)
    times: dict = field(default_factory=dict)  # interval key -> [(file line, time_ms), ...]
    error: str | None = None  # cannot read


# The intervals time-to-train is made of: a stop before its start is a negative time, which the
# official compliance checker does not test (it checks the order of lines, not of their times).
# Other lines may go back in time legitimately: NVIDIA's v4.0 SD logs write evaluations done
# after training with earlier timestamps (up to ~1 h back).
INTERVALS = (("init_start", "init_stop"), ("run_start", "run_stop"))
INTERVAL_KEYS = {k for pair in INTERVALS for k in pair}


def interval_findings(s: Scan, display: str) -> list[Finding]:
    """A run_stop (init_stop) whose time_ms is before the run_start (init_start) it closes."""
    out = []
    for start, stop in INTERVALS:
        if not (s.times.get(start) and s.times.get(stop)):
            continue
        (n0, t0), (n1, t1) = s.times[start][0], s.times[stop][-1]
        if t1 < t0:
            out.append(
                Finding(
                    display,
                    n1,
                    "harness",
                    "error",
                    f"{stop} time_ms {t1} is {t0 - t1} ms before {start} (line {n0}): the interval "
                    "would be negative",
                    "the clock went back or the lines were edited: rerun, or restore the original times",
                )
            )
    return out


def scan(path: str) -> Scan:
    s = Scan()
    try:
        with open_input(path, encoding="latin-1") as f:
            for n, line in enumerate(f, 1):
                if TOKEN not in line:
                    continue
                idx = len(s.file_line)
                s.file_line.append(n)
                if len(line) > MAX_LINE:
                    s.too_long.append((n, len(line)))
                    s.text.append("")
                    continue
                text = line[line.rindex(TOKEN) :].strip()[len(TOKEN) :]
                s.text.append(text)
                m, err = parse_record(text)
                if err:
                    s.bad.append((n, err, _crashes_official_parser(text)))
                    continue
                s.keys.setdefault(m["key"], []).append(idx)
                s.first_value.setdefault(m["key"], m["value"])
                if m["key"] in INTERVAL_KEYS and isinstance(m.get("time_ms"), (int, float)):
                    s.times.setdefault(m["key"], []).append((n, m["time_ms"]))
    except OSError as e:
        s.error = e.strerror or str(e)
    return s


def _crashes_official_parser(text: str) -> bool:
    """True where mlp_parser.string_to_logline raises something other than ValueError (uncaught
    there): JSON that is not an object, a missing field (KeyError), time_ms None/object (TypeError).
    ValueErrors (bad JSON, time_ms "1.2.3") are reported by the checker as parsing errors."""
    try:
        m = json.loads(text)
        float(m["time_ms"])
        m["key"], m["value"], m["metadata"]  # noqa: B018 - the accesses are the test
    except ValueError:
        return False
    except Exception:  # noqa: BLE001
        return True
    return False


# ------------------------------------------------------------------------------------------
# turning checker messages into one line + a fix

_CHECK_RE = re.compile(
    r"CHECK for '(?P<key>[^']+)' failed in line (?P<idx>-?\d+):\n.*?\nfailed test: (?P<test>.*?)\n", re.S
)
_EXEC_RE = re.compile(
    r"Failed executing (?:CHECK code:\n(?P<test>.*?)\ntriggered by line:|code (?P<act>\w+) code triggered by line :)\n(?P<line>[^\n]*)",
    re.S,
)
_REQ_RE = re.compile(
    r"Required (?P<req>EXACTLY_ONE|AT_LEAST_ONE|AT_LEAST\((?P<n>\d+)\)) occurrence of '(?P<key>[^']+)' but found (?P<found>\d+)(?P<rest>.*)",
    re.S,
)
_ALT_RE = re.compile(r"Required AT_LEAST_ONE occurrence of (?P<keys>'.*')")
_ATLEAST_RE = re.compile(r"Failed checks for (?P<key>\S+) : (?P<test>.*)", re.S)

_KEY_FIX = {
    "init_stop": "initialization must end within the allowance (30 min closed, 4 h open) measured from the first "
    "init_start, and submission_division must be logged before init_stop (else the allowance is 0)",
    "init_start": "log init_start before init_stop and run_start",
    "run_start": "log init_stop before run_start (order: init_start, init_stop, run_start, run_stop)",
    "run_stop": 'log run_stop once, after run_start, with metadata {"status": "success"|"aborted"}',
    "eval_accuracy": "the logged quality does not meet the rule (target not reached, or metadata missing): "
    "train to the target or log the progress key the benchmark needs",
    "aggregated_eval_accuracy": "log an FID and a CLIP eval_accuracy for every checkpoint, with the same samples_count",
    "opt_base_learning_rate": "use a learning rate the closed rules allow (see the failed test), or submit as open",
    "opt_name": "use the optimizer the rules prescribe for this benchmark (see the failed test)",
    "submission_benchmark": "this benchmark is not in these rules' list for the division (`mlperf benchmarks show BENCH` lists its rulesets)",
    "submission_division": "log submission_division once, 'closed' or 'open', before init_stop",
    "global_batch_size": "log global_batch_size exactly once, with one value",
    "harness_size": "tiny logs carry harness_size: tiny exactly once (written by `mlperf run --size tiny`)",
}


def _line_of(scan: Scan, key: str | None, which: int = 0) -> int | None:
    idxs = scan.keys.get(key or "", [])
    if not idxs:
        return None
    return scan.file_line[idxs[min(which, len(idxs) - 1)] if which >= 0 else idxs[-1]]


def _line_of_text(scan: Scan, full: str) -> int | None:
    text = full.strip()
    text = text[len(TOKEN) :] if text.startswith(TOKEN) else text
    for i, t in enumerate(scan.text):
        if t == text:
            return scan.file_line[i]
    return None


def explain(msg: str, severity: str, scan: Scan, file: str) -> Finding:
    msg_s = msg.strip()
    m = _CHECK_RE.search(msg_s + "\n")
    if m:
        key, idx, test = m["key"], int(m["idx"]), m["test"].strip()
        line, value = None, None
        if 0 <= idx < len(scan.file_line):
            line = scan.file_line[idx]
            rec, _ = parse_record(scan.text[idx])
            value = rec["value"] if rec else None
        elif "current line[v]=" in msg_s:  # a line the rules synthesise (SD aggregated evals)
            with contextlib.suppress(ValueError):
                value = json.loads(msg_s.split("current line[v]=", 1)[1]).get("value")
            line = _line_of(scan, "eval_accuracy", -1)
        fix = _KEY_FIX.get(key, f"log a '{key}' that satisfies the rule `{test}`")
        shown = f" (value {json.dumps(value)})" if value is not None else ""
        return Finding(
            file, line, "compliance", severity, f"CHECK for '{key}' failed{shown}: {test}", fix, detail=msg
        )
    m = _EXEC_RE.search(msg_s)
    if m:
        line = _line_of_text(scan, m["line"])
        rec, _ = (
            parse_record(m["line"].strip()[len(TOKEN) :])
            if m["line"].strip().startswith(TOKEN)
            else (None, None)
        )
        key = rec["key"] if rec else "?"
        what = f"rule code `{m['test'].strip()}`" if m["test"] else f"{m['act']} code"
        return Finding(
            file,
            line,
            "compliance",
            severity,
            f"the checker could not evaluate {what} on '{key}'",
            f"'{key}' has a value or metadata of the wrong type or shape (e.g. a string where a number is "
            "expected): log it as the rules expect",
            detail=msg,
        )
    m = _REQ_RE.match(msg_s)
    if m:
        key, found = m["key"], int(m["found"])
        rest = m["rest"].strip()
        text = f"required {m['req']} '{key}', found {found}" + (f" {rest}" if rest else "")
        if found == 0:
            fix = _KEY_FIX.get(key) if key in ("run_stop", "harness_size") else None
            fix = fix or (
                f"log '{key}' (where it goes: the order of harness/core/mllog.py, or the official "
                "rules, mlperf_logging/compliance_checker/training_<ruleset>/*.yaml)"
            )
            line = None
        else:
            fix = _KEY_FIX.get(key, f"log '{key}' once, from rank 0 only")
            line = _line_of(scan, key, 1)
        return Finding(file, line, "compliance", severity, text, fix, detail=msg)
    m = _ALT_RE.match(msg_s)
    if m:
        return Finding(
            file,
            None,
            "compliance",
            severity,
            f"required at least one of {m['keys']}",
            "log the block_* (or epoch_*) and eval_* events around training and evaluation",
            detail=msg,
        )
    m = _ATLEAST_RE.match(msg_s)
    if m:
        key = m["key"]
        return Finding(
            file,
            _line_of(scan, key, -1),
            "compliance",
            severity,
            f"no '{key}' line passes `{m['test'].strip()}`",
            _KEY_FIX.get(key, f"at least one '{key}' must satisfy the rule"),
            detail=msg,
        )
    if msg_s == "No log lines detected":
        return Finding(
            file,
            None,
            "compliance",
            severity,
            "No log lines detected",
            "the file has no ':::MLLOG ' lines: it is empty, truncated or not an MLPerf log",
            detail=msg,
        )
    if msg_s.startswith("Could not find config file"):
        return Finding(
            file,
            None,
            "compliance",
            severity,
            msg_s.splitlines()[0],
            "the rule file is missing: for tiny logs, the benchmark must be ours and in the log's ruleset "
            "(benchmarks/tiny_rules.py writes <name>/tiny_rules.yaml for those)",
            detail=msg,
        )
    if msg_s.startswith("failed test:"):
        first = msg_s.splitlines()[0]
        return Finding(
            file,
            None,
            "compliance",
            severity,
            f"end-of-log check {first}",
            "the log as a whole does not satisfy this rule (see the failed test)",
            detail=msg,
        )
    return Finding(
        file,
        None,
        "compliance",
        severity,
        msg_s.splitlines()[0][:300],
        "see the checker's message (--json 'detail')",
        detail=msg,
    )


def explain_crash(e: BaseException, fatal: list, scan: Scan, file: str, raw: str) -> Finding:
    what = f"{type(e).__name__}: {e}"
    if fatal:
        n, why = fatal[0]
        more = f" (and {len(fatal) - 1} more such lines)" if len(fatal) > 1 else ""
        return Finding(
            file,
            n,
            "compliance",
            "error",
            f"the official checker crashed ({what}) on this MLLOG line: {why}{more}",
            "every MLLOG line is a JSON object with time_ms, key, value and metadata: repair the line",
            detail=raw,
        )
    if isinstance(e, KeyError) and str(e).strip("'") in ("FID", "CLIP", "samples_count", "metric"):
        return Finding(
            file,
            _line_of(scan, "eval_accuracy", -1),
            "compliance",
            "error",
            f"the official checker crashed ({what}) on the Stable Diffusion evaluations",
            "log both an FID and a CLIP eval_accuracy (metadata metric and samples_count) for every "
            "evaluated checkpoint",
            detail=raw,
        )
    return Finding(
        file,
        None,
        "compliance",
        "error",
        f"the official checker crashed ({what})",
        "a line lacks a field the rules read: compare the log with a passing one",
        detail=raw,
    )
