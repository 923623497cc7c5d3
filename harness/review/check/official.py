"""The official compliance checker, run as mlperf-logging 4.1.68 runs it, minus its two slow parts.

`ComplianceChecker.check_file` = parse the log + `check_loglines` (the rules) + log the messages.
Profiled on a 500-line published BERT log it takes ~2.4 s, of which:
- ~1.1 s parsing: `mlp_parser.strip_and_dedup` runs `re.sub('.*:::MLLOG ', ...)` on every line,
  quadratic in the line length. `parse` below cuts each line at its last token instead (the same
  text: core/mllog_reader.iter_token_lines) and hands it to the package's own `string_to_logline`,
  so the LogLines, the parse failures and the exceptions are the package's;
- ~1.1 s re-reading the YAML rule files with the pure-Python loader for every log.
  `cached_rules()` loads each rule file once per process (keyed by path, size and mtime), with
  libyaml's CBaseLoader where PyYAML has it (the same documents for all 282 rule files of the
  package, 14x faster: tests/unit/test_results_rules.py), and hands the checker a deep copy,
  what `yaml.load(f, Loader=yaml.BaseLoader)` would return.
The rules, their evaluation and their messages are the package's code, unchanged.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.mllog_reader import TOKEN, iter_token_lines
from harness.core.rulesets import USAGE

_lock = threading.RLock()  # guards the module attributes swapped below
_rules_cache: dict = {}


def parser_module(ruleset: str):
    return importlib.import_module(
        "mlperf_logging.compliance_checker.mlp_parser.ruleset_" + ruleset.replace(".", "")
    )


def parse(path: str, ruleset: str) -> tuple[list, list]:
    """(loglines, failed) exactly as `mlp_parser.parse_file(path, ruleset)` returns them.
    Raises what the package's parser raises (OSError, KeyError, TypeError for malformed lines)."""
    mod = parser_module(ruleset)
    if getattr(mod, "TOKEN", None) != TOKEN:  # 0.6.0 logs are another format: its own parser
        return mod.parse_file(path)
    loglines, failed = [], []
    for _n, idx, line in iter_token_lines(path):
        try:
            loglines.append(mod.string_to_logline(idx, line))
        except ValueError as e:
            failed.append((line, str(e)))
    return loglines, failed


class _CachedYaml:
    """Stands in for the `yaml` module inside mlp_compliance while a check runs."""

    def __init__(self, real):
        self._real = real
        self.BaseLoader = real.BaseLoader

    def __getattr__(self, name):
        return getattr(self._real, name)

    def load(self, stream, Loader=None):  # noqa: N803 - yaml's own signature
        name = getattr(stream, "name", None)
        try:
            st = os.stat(name)
            key = (os.path.realpath(name), st.st_size, st.st_mtime_ns, Loader)
        except (TypeError, OSError):
            return self._real.load(stream, Loader=Loader)
        if key not in _rules_cache:
            fast = getattr(self._real, "CBaseLoader", None) if Loader is self._real.BaseLoader else None
            _rules_cache[key] = self._real.load(stream, Loader=fast or Loader)
        return copy.deepcopy(_rules_cache[key])


@contextlib.contextmanager
def cached_rules():
    """Run the compliance checker with each rule file parsed once per process (see above)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    with _lock:
        real = mlp_compliance.yaml
        mlp_compliance.yaml = _CachedYaml(real) if not isinstance(real, _CachedYaml) else real
        try:
            yield
        finally:
            mlp_compliance.yaml = real


def check_parsed(checker, loglines: list, failed: list, config: str) -> bool:
    """`ComplianceChecker.check_file` after its parse: the same messages, the same verdict."""
    logging.info("Running compliance on file")
    if failed:
        logging.warning(" Found parsing errors:")
        for line, error in failed:
            logging.warning("  %s", line)
            logging.warning("   ^^  %s", error)
        checker.put_message("Log lines had parsing errors.")
    checker.check_loglines(loglines, config)
    checker.log_messages()
    return not checker.has_messages()


def check_file(checker, path: str, config: str) -> bool:
    """Drop-in for `checker.check_file(path, config)`, with the fast parse and cached rules."""
    from mlperf_logging.compliance_checker import mlp_compliance

    loglines, failed = parse(path, checker.ruleset)
    mlp_compliance.enqueued_configs.clear()  # leftovers of a crashed check would chain on
    try:
        with cached_rules():
            return check_parsed(checker, loglines, failed, config)
    finally:
        mlp_compliance.enqueued_configs.clear()


@dataclass
class Verdict:
    """The summarizer's compliance step on one file."""

    passed: bool
    loglines: list | None = None  # None when the file could not be parsed at all
    failed: list = field(default_factory=list)  # (line, why) the parser could not take
    why: str | None = None  # one line: why it failed or crashed
    crashed: bool = False  # the official tool raises here (the summarizer stops)


def quiet_check(path: str, ruleset: str, tiny_config: Callable[[str], str] | None = None) -> Verdict:
    """The result summarizer's compliance step (`_read_result_file`: a quiet checker and the
    ruleset's common.yaml; our own tiny logs get the rule file `tiny_config(ruleset)` names, asked only
    for a tiny log). Never raises for contents."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(USAGE, ruleset, True, False)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the checker logs at INFO/WARNING; the verdict is what counts
    try:
        loglines, failed = parse(path, ruleset)
        tiny = tiny_config and any(
            ll.key == "harness_size" and ll.value.get("value") == "tiny" for ll in loglines
        )
        config = tiny_config(ruleset) if tiny else f"{USAGE}_{ruleset}/common.yaml"
        mlp_compliance.enqueued_configs.clear()
        with cached_rules():
            ok = check_parsed(checker, loglines, failed, config)
    except OSError as e:
        return Verdict(False, why=f"cannot read the file: {e.strerror or e}")
    except Exception as e:  # noqa: BLE001 - the official tools crash here; we report and go on
        return Verdict(
            False, why=f"the official checker crashes on it ({type(e).__name__}: {e})", crashed=True
        )
    finally:
        mlp_compliance.enqueued_configs.clear()
        root.setLevel(level)
    if ok:
        return Verdict(True, loglines, failed)
    msgs = [*checker.overwritable.values(), *checker.not_overwritable]
    why = next((_condense(m) for m in msgs if m.strip()), "no message")
    if failed:
        why = f"unparsable MLLOG line ({failed[0][1]})"
    return Verdict(False, loglines, failed, why)


@contextlib.contextmanager
def fast_token_regex(module):
    """Within `module` (the RCP checker reads logs itself), `re.sub('.*:::MLLOG ', TOKEN, line)`
    -- quadratic in the line length -- becomes the equal cut at the line's last token (a line
    from readlines() has no newline before its end, which `.` would not cross)."""
    real = module.re

    class _Re:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def sub(pattern, repl, string, *args, **kw):
            if pattern == ".*" + TOKEN and repl == TOKEN and not args and not kw and "\n" not in string[:-1]:
                i = string.rfind(TOKEN)
                return string if i < 0 else string[i:]
            return real.sub(pattern, repl, string, *args, **kw)

    with _lock:
        module.re = _Re()
        try:
            yield
        finally:
            module.re = real


def _condense(msg: str) -> str:
    """One line of a checker message: its first line, plus the failed test when it names one."""
    lines = msg.strip().splitlines()
    test = next((x for x in lines if x.startswith("failed test:")), None)
    return lines[0].rstrip(":") + (f" ({test})" if test and test != lines[0] else "")
