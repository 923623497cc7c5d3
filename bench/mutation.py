"""Mutation score of the torch-free modules that decide what users see (issue 43): scores, check
verdicts and messages, MLLOG lines, rulesets, resolved configs, the planner's memory and FLOPs.
A bench script, not a CI step: the full run takes hours on 2 shared cores.

    python bench/mutation.py                                  # every module of MODULES, the table
    python bench/mutation.py --module harness/planner/memory.py --list-survivors
    python bench/mutation.py --jobs 2 --out /tmp/mutants.json # two scratch copies side by side
    python bench/mutation.py --module M --coverage            # the clean run only: who reaches M

Our own harness over `ast` (bench/mutation_ops.py) instead of a tool: mutmut 3 rewrites the tree
into a `mutants/` copy with trampolines in every function (tracebacks, line-counting and
source-reading tests see another file), cosmic-ray needs a session database and a config per
module; neither is a dependency of the project. This needs the stdlib only and works offline.

How: the repository's files (tracked, and untracked but not ignored) are copied once into a
scratch folder; a mutant rewrites only its module there and the original is put back after it.
A module's test files (MODULES, reviewed by hand) first run clean under a line tracer
(sys.monitoring; in the CLI subprocesses the tests start too, through a sitecustomize.py put into
the copy for that run only), which tells which tests reach each line. A mutant then runs
`pytest -x -q -n 0 -m "not slow" -p no:cacheprovider` on the tests that reach its lines and, if
they pass, on all the module's test files: only then does it survive. A mutant no test reaches
survives without a run. A run past 3x the clean run's time (at least 60 s), and again past 6x on
a second try (a busy machine is not a hang), counts as killed.
pytest runs in a process forked from this one after the third-party imports (torch, hypothesis:
~4 s a run on 2 cores); nothing of the repository is imported here, so each run imports the copy.

Equivalent mutants (no input tells them from the original) are listed, each with a reason, in
bench/mutation_equivalent.yaml; the score is given raw and without them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from mutation_ops import Mutant, mutants
from mutation_report import report
from mutation_run import UNREACHED, Clean, Copy, judge, preload

REPO = Path(__file__).resolve().parents[1]
MARK = {"killed": ".", "timeout": "T", "survived": "S"}  # progress, one per mutant ("-": unreached)
EQUIVALENT = Path(__file__).with_name("mutation_equivalent.yaml")


def unit(*names: str) -> list[str]:
    return [str(Path("tests", "unit", f"test_{n}.py")) for n in names]


def integration(*names: str) -> list[str]:
    return [str(Path("tests", "integration", f"test_{n}.py")) for n in names]


# Files that reach a module but take long (test_planner_forward 23 s, test_one_round_per_folder 16 s
# of real runs) are left out where quicker ones test the same behaviour: they would rerun for every
# mutant of a line run at import and for every survivor.
SCORE = unit("pins_scoring", "results_score") + integration("results_rounds", "check_tree")
CHECK = unit("pins_check", "pins_check_tree", "results_rules", "power_lint")
CHECK += integration("check_logs", "check_tree")
MLLOG = unit("pins_mllog", "rulesets_per_benchmark", "diagnose", "power_descriptor", "resume_bad_folders")
READER = unit("pins_mllog", "fuzz_inputs", "results_rules", "check_messages", "diagnose", "results_score")
READER += integration("check_logs")
RULESETS = unit("pins_resolve", "pins_check", "rulesets_per_benchmark", "results_rules", "benchmark_registry")
RULESETS += unit("results_score")
RULESETS += integration("check_logs", "results_rounds")
CONFIG = unit("pins_resolve", "layout_and_config", "config_fields", "gpt3_model_config", "gnn_config")
CONFIG += unit("rulesets_per_benchmark")
SWITCHES = unit("pins_resolve", "switch_libraries", "sd_switches", "gnn_precision", "config_fields")
SYSTEMS = unit("pins_systems", "systems", "planner_cli", "power_descriptor", "config_fields")
PLANNER = unit("pins_planner_memory", "pins_planner_prices", "pins_planner_flops", "cost_models")
PLANNER += unit("planner_model", "planner_params", "planner_cli")
# group -> module -> its quick-tier test files: those that reach it (`--coverage` shows which do),
# found by grep for its names and the CLI verbs that run it, then reviewed by hand
MODULES: dict[str, dict[str, list[str]]] = {
    "scoring": {
        "harness/review/results/score.py": SCORE,
        "harness/review/results/olympic.py": SCORE,
        "harness/review/results/rcp.py": SCORE,
    },
    "check": {
        "harness/review/check/log.py": CHECK,
        "harness/review/check/systems.py": CHECK,
        "harness/review/check/tree.py": CHECK + unit("one_round_per_folder"),
        "harness/review/check/path.py": CHECK + unit("fuzz_inputs"),
        "harness/review/check/official.py": CHECK + unit("pins_scoring"),
    },
    "mllog": {"harness/core/mllog.py": MLLOG, "harness/core/mllog_reader.py": READER},
    "rulesets": {"harness/core/rulesets.py": RULESETS},
    "resolve": {
        "harness/resolve/config.py": CONFIG,
        "harness/resolve/runplans.py": CONFIG + unit("sbatch_render"),
        "harness/resolve/systems.py": SYSTEMS,
        "harness/resolve/switches.py": SWITCHES,
        "harness/core/layout.py": CONFIG + unit("planner_model"),
    },
    "planner": {
        "harness/planner/memory.py": PLANNER,
        "harness/planner/workloads.py": PLANNER,
        "benchmarks/costs.py": PLANNER,
        "benchmarks/gpt3/cost.py": PLANNER,
        "benchmarks/llama2_70b_lora/cost.py": PLANNER + unit("llama2_lora"),
    },
}
# Left out, one line each: benchmarks/gnn/cost.py and benchmarks/stable_diffusion/cost.py (data
# parallel: their memory is a fitted GiB per sample, their FLOPs a published constant);
# harness/planner/timing.py (the time model: fitted efficiencies, not the FLOPs it divides).


def copy_repo(dest: Path) -> None:
    """The working tree's files as git sees them (tracked, or untracked and not ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for rel in sorted(set(out.decode().split("\0")) - {""}):
        src, dst = REPO / rel, dest / rel
        if src.is_symlink() or src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)


def run_module(
    path: str, tests: list[str], copies: list[Copy], coverage: bool, match: str = ""
) -> list[dict] | str:
    """Every mutant of one module judged (rows), or why the module was skipped."""
    source = (copies[0].root / path).read_bytes()  # the copy's: the working tree may move on meanwhile
    clean = Clean(copies[0], path, tests)
    if not clean.ok:
        tail = copies[0].log.read_text(errors="replace").splitlines()[-15:]
        return "its tests fail unmutated:\n    " + "\n    ".join(tail)
    if coverage:
        print(f"{path}: clean {clean.seconds:.0f} s; lines reached: {len(clean.reach)}")
        files = sorted({t.split("::")[0] for ts in clean.reach.values() for t in ts if t})
        print("  reached from: " + ", ".join(files))
        return []
    todo = [m for m in mutants(path, source) if match in m.key]
    timeout = max(60.0, 3 * clean.seconds)
    jobs = len(copies)
    print(f"{path}: {len(todo)} mutants, clean run {clean.seconds:.0f} s ", end="", flush=True)

    def work(share: list[Mutant], copy: Copy) -> list[dict]:
        rows = []
        for m in share:
            status, by = judge(m, copy, clean, timeout)
            print(MARK[status] if by != UNREACHED else "-", end="", flush=True)
            rows.append({"key": m.key, "path": m.path, "line": m.line, "op": m.op, "original": m.original})
            rows[-1].update(mutated=m.mutated, status=status, by=by)
        return rows

    if jobs == 1:
        rows = work(todo, copies[0])
        print()
        return rows
    readers = []
    for i, copy in enumerate(copies):  # one forked worker per scratch copy, rows back through a pipe
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            try:
                with os.fdopen(w, "w") as f:
                    json.dump(work(todo[i::jobs], copy), f)
            finally:
                os._exit(0)
        os.close(w)
        readers.append(os.fdopen(r))
    rows = [row for f in readers for row in json.load(f)]
    for _ in readers:
        os.wait()
    print()
    return sorted(rows, key=lambda r: (r["line"], r["key"]))


def main() -> int:
    # Ctrl-C or `kill` (also when started in the background, where SIGINT comes ignored): the
    # running pytest and its processes are ended and the scratch copies removed
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", help="only this module (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="scratch copies run side by side")
    ap.add_argument("--list-survivors", action="store_true")
    ap.add_argument(
        "--coverage", action="store_true", help="clean runs only: which test files reach each module"
    )
    ap.add_argument("--match", default="", help="only the mutants whose key contains this text")
    ap.add_argument("--out", type=Path, help="write every mutant's row here (JSON)")
    ap.add_argument("--load", type=Path, action="append", help="report the rows of earlier --out files")
    a = ap.parse_args()
    table = {m: tests for group in MODULES.values() for m, tests in group.items()}
    chosen = a.module or list(table)
    for m in chosen:
        if m not in table:
            ap.error(f"--module {m}: not one of MODULES ({', '.join(table)})")
    equivalent = {e["key"]: e["why"] for e in yaml.safe_load(EQUIVALENT.read_text()) or []}
    if a.module and not a.load:
        equivalent = {k: v for k, v in equivalent.items() if k.split("::")[0] in chosen}
    t0 = time.monotonic()
    results: dict[str, list[dict]] = {}
    skipped: dict[str, str] = {}
    if a.load:
        for f in a.load:
            for row in json.loads(f.read_text()):
                if row["path"] in chosen:
                    results.setdefault(row["path"], []).append(row)
    else:
        preload()
        with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
            copies = [Copy(Path(tmp) / f"copy{i}") for i in range(max(1, a.jobs))]
            for c in copies:
                copy_repo(c.root)
            for m in chosen:
                out = run_module(m, table[m], copies, a.coverage, a.match)
                if isinstance(out, str):
                    skipped[m] = out
                    print(f"{m}: skipped: {out}", flush=True)
                elif out:
                    results[m] = out
                if a.out:  # after each module: a long run's rows survive its interruption
                    a.out.write_text(json.dumps([r for rows in results.values() for r in rows], indent=1))
    if not a.coverage:
        report(MODULES, results, skipped, equivalent, a.list_survivors)
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
