"""How bench/mutation.py runs a module's tests in a scratch copy: clean under a line tracer, then
once or twice per mutant, each run in a pytest process forked from the parent (see its docstring).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from mutation_ops import Mutant

PYTEST = ["-x", "-q", "-n", "0", "-m", "not slow", "-p", "no:cacheprovider"]
# Third-party modules the tests import, imported once here so that each forked run has them
PRELOAD = ["pytest", "xdist.plugin", "hypothesis", "torch", "numpy", "scipy"]
PRELOAD += ["pydantic", "yaml", "click", "rich.console", "mlperf_logging.mllog", "jinja2"]
UNREACHED = "no test reaches it"
# The tracer, as the copy's sitecustomize.py during the clean run: every Python process started
# with the copy on its path (the tests' CLI subprocesses: PYTHONPATH) appends "test id<TAB>line"
# for each line of the module it runs, once per test (DISABLE; the pytest process re-enables per
# test). Written as it goes: multiprocessing workers end in os._exit.
TRACER = """import os, sys
_spec = os.environ.get("MUTATION_TRACE")
if _spec:
    _target, _out = _spec.split(os.pathsep)
    _f, _mon, _seen = open(_out, "a", buffering=1), sys.monitoring, {}
    def _line(code, n):
        hit = _seen.get(code.co_filename)
        if hit is None:
            hit = _seen[code.co_filename] = os.path.realpath(code.co_filename) == _target
        if hit:
            _f.write(os.environ.get("MUTATION_TEST", "") + "\\t" + str(n) + "\\n")
        return _mon.DISABLE
    _mon.use_tool_id(_mon.COVERAGE_ID, "mutation")
    _mon.register_callback(_mon.COVERAGE_ID, _mon.events.LINE, _line)
    _mon.set_events(_mon.COVERAGE_ID, _mon.events.LINE)
"""


def preload() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what tests/conftest.py sets before torch
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


class Copy:
    """One scratch copy of the repository; `log` holds the output of its latest pytest run."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.log = root.with_suffix(".log")
        self.mtime = int(time.time()) + 10

    def write(self, rel: str, data: bytes) -> None:
        # A new mtime at each write: the pyc cache keys on (mtime s, size) and a flipped `<` / `>`
        # keeps the size, so a stale pyc could otherwise run the previous mutant
        path = self.root / rel
        path.write_bytes(data)
        self.mtime += 2
        os.utime(path, (self.mtime, self.mtime))


class _PerTest:
    """pytest plugin of the traced run: names the running test for the tracer, re-arms the tracer,
    and times each test (the order the mutants' runs take them in)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        os.environ["MUTATION_TEST"] = item.nodeid
        sys.monitoring.restart_events()
        t0 = time.monotonic()
        try:
            return (yield)
        finally:
            self.seconds[item.nodeid] = time.monotonic() - t0
            os.environ["MUTATION_TEST"] = ""


def run_pytest(copy: Copy, args: list[str], timeout: float, env: dict | None = None) -> tuple[str, str]:
    """(passed | failed | timeout | unusable, first failing test) of one pytest run in a forked
    process; unusable: pytest found no such test (usage error, nothing collected)."""
    pid = os.fork()
    if pid == 0:  # the child: becomes `python -m pytest ARGS` run in the copy
        os.setpgid(0, 0)
        fd = os.open(copy.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(copy.root)
        here = str(Path(__file__).parent)
        sys.path[:] = [str(copy.root)] + [p for p in sys.path if p != here]
        os.environ.update(env or {}, PYTHONPATH=str(copy.root))
        timer = _PerTest()
        if env:
            import sitecustomize  # noqa: F401 - the copy's tracer, armed by MUTATION_TRACE
        rc = int(pytest.main(PYTEST + args, plugins=[timer] if env else []))
        if env:
            copy.root.with_suffix(".seconds").write_text(json.dumps(timer.seconds))
        os._exit(rc)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child got there first (or is gone)
    deadline, status = time.monotonic() + timeout, None
    try:
        while status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:  # pytest's exit codes: 0 passed, 1 failed, 2 collection error, 4/5 no such test
                rc = os.waitstatus_to_exitcode(code)
                status = "passed" if rc == 0 else "unusable" if rc in (4, 5) else "failed"
            elif time.monotonic() > deadline:
                status = "timeout"
            else:
                time.sleep(0.1)
    finally:  # also on Ctrl-C / SIGTERM: no run outlives this process
        try:
            os.killpg(pid, signal.SIGKILL)  # the run's own leftovers (or all of it, on a timeout)
        except OSError:
            pass
        if status is None or status == "timeout":
            os.waitpid(pid, 0)
    text = copy.log.read_text(errors="replace") if copy.log.exists() else ""
    first = next((ln.split(" - ")[0] for ln in text.splitlines() if ln.startswith(("FAILED ", "ERROR "))), "")
    return status, first


class Clean:
    """What the clean run of a module's tests tells: whether they pass, how long they take, each
    test's seconds (in run order), and the tests reaching each line ('' = outside any test:
    imports and collection, which every test depends on)."""

    def __init__(self, copy: Copy, module: str, tests: list[str]):
        site, out = copy.root / "sitecustomize.py", copy.root.with_suffix(".trace")
        site.write_text(TRACER)
        out.unlink(missing_ok=True)
        spec = f"{copy.root / module}{os.pathsep}{out}"
        t0 = time.monotonic()
        try:
            status, _ = run_pytest(copy, tests, 3600, {"MUTATION_TRACE": spec, "MUTATION_TEST": ""})
        finally:
            site.unlink()
        self.files, self.ok, self.seconds = tests, status == "passed", time.monotonic() - t0
        timed = copy.root.with_suffix(".seconds")
        self.tests: dict[str, float] = json.loads(timed.read_text()) if self.ok else {}
        self.reach: dict[int, set[str]] = defaultdict(set)
        for ln in out.read_text().splitlines() if out.exists() else []:
            test, _, n = ln.rpartition("\t")
            self.reach[int(n)].add(test)

    def runs(self, first: int, last: int) -> list[list[str]] | None:
        """pytest arguments of a mutant of lines first..last: the tests reaching them, the files
        with the quickest first; then, if that was not all, the rest of the files. None: no test
        reaches the lines."""
        reached = set().union(*(self.reach.get(n, ()) for n in range(first, last + 1)))
        if not reached:
            return None
        if "" in reached:
            reached = set(self.tests)
        order = list(self.tests)
        per_file: dict[str, float] = defaultdict(float)
        for t in reached:
            per_file[t.split("::")[0]] += self.tests.get(t, 0.0)
        ids = sorted(reached, key=lambda t: (per_file[t.split("::")[0]], order.index(t) if t in order else 0))
        rest = set(self.tests) - reached
        return [ids] + (
            [self.files + [a for t in sorted(reached) for a in ("--deselect", t)]] if rest else []
        )


def judge(m: Mutant, copy: Copy, clean: Clean, timeout: float) -> tuple[str, str]:
    """(killed | survived | timeout, the failing test or why it survived) of one mutant."""
    runs = clean.runs(m.line, m.end_line)
    if runs is None:
        return "survived", UNREACHED
    original = (copy.root / m.path).read_bytes()
    copy.write(m.path, m.apply(original))
    try:
        for args in runs:
            status, by = run_pytest(copy, args, timeout)
            if status == "timeout":  # a hang, or only a busy machine: a second try, twice as long
                status, by = run_pytest(copy, args, 2 * timeout)
            if status == "unusable":  # the mutant renamed a parametrized test: all the files
                status, by = run_pytest(copy, clean.files, timeout)
                if status == "passed":
                    return "survived", ""
            if status != "passed":
                return ("timeout" if status == "timeout" else "killed"), by
        return "survived", ""
    finally:
        copy.write(m.path, original)
