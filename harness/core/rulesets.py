"""What the installed mlperf-logging says about rulesets and benchmarks, and which ruleset applies.

Nothing here is a copy of the package's tables: rulesets are the `training_X.Y.Z` rule folders of
its compliance checker, benchmarks per ruleset and run counts come from `benchmark_meta`, RCPs
from the RCP checker's JSON files, and renamed benchmarks (gnn -> rgat, ssd -> retinanet) are
found by comparing those RCP files: a benchmark that leaves the list in one ruleset while another
arrives with the very same reference convergence points is the same benchmark under a new name.

Ruleset inference (`resolve`), first that applies:
  1. `--ruleset X.Y.Z` given;
  2. a round: `--round v5.0`, or a path component named like a round (`v5.0`,
     `training_results_v5.0`) -> 5.0.0, when the package has that ruleset;
  3. the benchmark: the newest ruleset that lists it, as `mlperf run` takes (`for_run`): run and
     check agree. Rules grow (later rulesets add keys an older log lacks), so a published log
     checked this way can miss keys: review/check/older.py then says once which ruleset the logs
     look like instead of one error per key and log;
  4. the newest ruleset.
Each answer carries a short reason (`how`), shown beside every verdict. A log our runs wrote
names its ruleset itself (`harness_ruleset`), which the checker takes before step 2.

A run's ruleset (`for_run`): `--ruleset`, else `--round`, else the newest ruleset that lists the
benchmark under any of its names (the current rules a submitter is held to); the benchmark is
logged under the name that ruleset uses (gnn up to 4.1.0, rgat from 5.0.0).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re

from harness.core.errors import ConfigError, suggest

USAGE = "training"
_ROUND_RE = re.compile(r"(?:^|[^0-9A-Za-z.])v?(\d+)\.(\d+)$")


DEFAULT = "default"
"""How a ruleset chosen by no flag, path or log is named (`resolve`): the start of its `how`."""


def default_ruleset() -> str:
    """The ruleset of a log that names none and has no known benchmark: the newest."""
    return rulesets()[-1]


def _key(ruleset: str) -> tuple:
    return tuple(int(x) for x in ruleset.split("."))


@functools.cache
def rulesets() -> tuple[str, ...]:
    """Training rulesets of the installed package that have rules and a benchmark list, oldest first."""
    from mlperf_logging import benchmark_meta

    here = _package_dir("compliance_checker")
    found = []
    for name in os.listdir(here):
        m = re.fullmatch(rf"{USAGE}_(\d+\.\d+\.\d+)", name)
        if m and os.path.isfile(os.path.join(here, name, "common.yaml")):
            try:
                benchmark_meta.get_allowed_benchmarks(USAGE, m[1])
            except ValueError:
                continue
            found.append(m[1])
    return tuple(sorted(found, key=_key))


def validate_ruleset(ruleset: str) -> str:
    """The ruleset itself, or ConfigError naming the ones the package knows."""
    known = rulesets()
    if ruleset not in known:
        raise ConfigError(f"unknown ruleset '{ruleset}'{suggest(ruleset, known)}; known: {', '.join(known)}")
    return ruleset


@functools.cache
def benchmarks_of(ruleset: str) -> tuple[str, ...]:
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks

    return tuple(dict.fromkeys(get_allowed_benchmarks(USAGE, ruleset)))  # 4.0 lists one twice


@functools.cache
def all_benchmarks() -> tuple[str, ...]:
    return tuple(sorted({b for r in rulesets() for b in benchmarks_of(r)}))


def rulesets_of(benchmark: str) -> list[str]:
    return [r for r in rulesets() if benchmark in benchmarks_of(r)]


def runs_required(benchmark: str | None) -> int | None:
    """Result files a benchmark's result folder must hold (the package checker's exact count)."""
    from mlperf_logging.benchmark_meta import get_result_file_counts

    return get_result_file_counts(USAGE).get(benchmark or "")


def max_dropped(benchmark: str | None) -> int:
    """Runs dropped at each end of the olympic mean. The summarizer and the RCP checker write it
    inline (`4 if benchmark == "unet3d" else 1`) rather than as data; test_results_rules.py reads
    the installed summarizer's source to catch a change."""
    return 4 if benchmark == "unet3d" else 1


def benchmark_alias(folder_name: str) -> str:
    """The summarizer's folder alias (`mask` is maskrcnn)."""
    return "maskrcnn" if folder_name == "mask" else folder_name


def validate_benchmark(name: str, ruleset: str | None = None) -> str:
    """The benchmark (or a rename of it) or ConfigError: one line naming what the package knows."""
    known = all_benchmarks()
    if name not in known:
        raise ConfigError(
            f"unknown benchmark '{name}'{suggest(name, known)}: mlperf-logging knows {', '.join(known)}"
        )
    if ruleset and name not in benchmarks_of(ruleset):
        other = [b for b in linked(name) if b in benchmarks_of(ruleset)]
        if not other:
            raise ConfigError(
                f"benchmark '{name}' is not in ruleset {ruleset} (it is in {', '.join(rulesets_of(name))})"
            )
    return name


# ------------------------------------------------------------------------------------------
# RCPs and renames


def _package_dir(name: str) -> str:
    """Folder of a package of mlperf-logging, found without importing it (the RCP checker
    imports scipy.stats: seconds)."""
    spec = importlib.util.find_spec(f"mlperf_logging.{name}")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"mlperf-logging has no package '{name}': reinstall mlperf-logging")
    return spec.submodule_search_locations[0]


def rcp_path(ruleset: str, benchmark: str) -> str | None:
    p = os.path.join(_package_dir("rcp_checker"), f"{USAGE}_{ruleset}", f"rcps_{benchmark}.json")
    return p if os.path.isfile(p) else None


@functools.cache
def rcp_records(ruleset: str, benchmark: str) -> dict:
    """The ruleset's RCP table of a benchmark (its name in that ruleset), as the RCP checker reads
    it; {} when there is none. Shared: do not modify."""
    p = rcp_path(ruleset, benchmark)
    if p is None:
        return {}
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def _rcp_points(ruleset: str, benchmark: str) -> frozenset:
    data = rcp_records(ruleset, benchmark)
    return frozenset(
        json.dumps(
            [r.get("BS"), r.get("Hyperparams"), r.get("Epochs to converge", r.get("samples to converge"))]
        )
        for r in data.values()
    )


@functools.cache
def renames() -> dict[str, str]:
    """{old name: new name} for benchmarks renamed between consecutive rulesets (same RCPs)."""
    out = {}
    rs = rulesets()
    for a, b in zip(rs, rs[1:]):
        gone = set(benchmarks_of(a)) - set(benchmarks_of(b))
        new = set(benchmarks_of(b)) - set(benchmarks_of(a))
        for old in sorted(gone):
            pts = _rcp_points(a, old)
            for cand in sorted(new):
                if pts and pts == _rcp_points(b, cand):
                    out[old] = cand
    return out


def linked(benchmark: str) -> list[str]:
    """The benchmark and every name it had or got across rulesets, oldest name first."""
    names = {benchmark}
    grew = True
    while grew:
        grew = False
        for old, new in renames().items():
            if (old in names) != (new in names):
                names |= {old, new}
                grew = True
    order = {b: min((_key(r) for r in rulesets_of(b)), default=(99,)) for b in names}
    return sorted(names, key=lambda b: (order[b], b))


# ------------------------------------------------------------------------------------------
# which ruleset applies


def round_ruleset(text: str | None) -> str | None:
    """'v5.0', '5.0', 'training_results_v5.0' -> '5.0.0' when the package has it."""
    if not text:
        return None
    m = _ROUND_RE.search(text.strip().rstrip("/"))
    if not m:
        return None
    cand = f"{int(m[1])}.{int(m[2])}.0"
    return cand if cand in rulesets() else None


def round_of_path(path: str | os.PathLike) -> tuple[str | None, str | None]:
    """(ruleset, path component) from the deepest path component named like a round."""
    parts = os.path.abspath(os.fspath(path)).split(os.sep)
    for part in reversed(parts):
        rs = round_ruleset(part)
        if rs:
            return rs, part
    return None, None


def resolve(
    ruleset: str | None = None,
    *,
    round_name: str | None = None,
    path: str | os.PathLike | None = None,
    benchmark: str | None = None,
) -> tuple[str, str]:
    """(ruleset, how it was chosen) -- see the module docstring for the order."""
    if ruleset:
        return validate_ruleset(ruleset), "--ruleset"
    if round_name:
        rs = round_ruleset(round_name)
        if rs is None:
            raise ConfigError(
                f"round '{round_name}' has no ruleset in mlperf-logging (known: {', '.join(rulesets())}); "
                "pass --ruleset"
            )
        return rs, f"round {round_name}"
    if path is not None:
        rs, part = round_of_path(path)
        if rs:
            return rs, f"round folder '{part}'"
    has = rulesets_of(benchmark) if benchmark else []
    if has:
        return has[-1], f"{DEFAULT}: the newest listing {benchmark}"
    return rulesets()[-1], f"{DEFAULT}: the newest"


def nearest_with(benchmark: str, ruleset: str) -> str:
    """The ruleset having `benchmark` closest to `ruleset`: the newest not after it, else the first."""
    has = rulesets_of(benchmark)
    before = [r for r in has if _key(r) <= _key(ruleset)]
    return before[-1] if before else has[0]


def for_benchmark(
    benchmark: str,
    ruleset: str | None = None,
    *,
    round_name: str | None = None,
    path: str | os.PathLike | None = None,
) -> tuple[str, str, str | None]:
    """(ruleset, how, problem) for a log or result folder of a benchmark the package knows.
    When the chosen ruleset does not list the benchmark (a gnn folder in a v5.0 tree), the
    nearest ruleset that does is used and `problem` says so (the official summarizer crashes on
    such a folder: its table has no column for it)."""
    rs, how = resolve(ruleset, round_name=round_name, path=path, benchmark=benchmark)
    if benchmark in benchmarks_of(rs) or not rulesets_of(benchmark):
        return rs, how, None
    near = nearest_with(benchmark, rs)
    problem = (
        f"{benchmark} is not a benchmark of ruleset {rs} ({how}), so the official summarizer crashes on this "
        f"folder; checked under {near}"
    )
    return near, f"{how}; {benchmark} is in {near}", problem


def for_folder(
    benchmark: str, folder: str, ruleset: str | None = None, round_name: str | None = None
) -> tuple[str, str, str | None]:
    """`for_benchmark` for a result folder, where a folder our runs wrote names its ruleset in
    its logs (`harness_ruleset`): taken when neither --ruleset nor --round is given."""
    if not ruleset and not round_name:
        from harness.core.tree import rulesets_in

        # the first log's, in run order (a mixed folder is an error of its own: tree.mixed_rulesets)
        own = next(iter(rulesets_in(folder)), None)
        if isinstance(own, str) and own in rulesets():
            rs, _how, problem = for_benchmark(benchmark, own)
            return rs, "the logs' harness_ruleset", problem
    return for_benchmark(benchmark, ruleset, round_name=round_name, path=folder)


# ------------------------------------------------------------------------------------------
# the ruleset of a run


def names_by_ruleset(benchmark: str) -> dict[str, str]:
    """{ruleset: the benchmark's name in it} over every name it had (gnn: 4.x gnn, 5.x rgat)."""
    out = {}
    for name in linked(benchmark):
        for r in rulesets_of(name):
            out[r] = name
    return dict(sorted(out.items(), key=lambda kv: _key(kv[0])))


def for_run(
    benchmark: str, ruleset: str | None = None, round_name: str | None = None
) -> tuple[str, str, str]:
    """(ruleset, the benchmark's name under it, how chosen) for a run of `benchmark`; ConfigError
    (one line naming the rulesets that list it) when the asked ruleset does not."""
    if ruleset and round_name:
        raise ConfigError(
            f"--ruleset {ruleset} and --round {round_name}: give one of them (a round names its ruleset)"
        )
    has = names_by_ruleset(benchmark)
    if not has:
        raise ConfigError(f"mlperf-logging lists '{benchmark}' in no training ruleset")
    if ruleset or round_name:
        rs, how = resolve(ruleset, round_name=round_name)
        asked = f"--ruleset {rs}" if ruleset else f"--round {round_name} (ruleset {rs})"
        if rs not in has:
            raise ConfigError(
                f"{asked}: that ruleset does not list {benchmark}; the rulesets that do: {', '.join(has)}"
            )
        return rs, has[rs], how
    newest = list(has)[-1]
    return newest, has[newest], f"default: the newest ruleset listing {benchmark} ({', '.join(has)})"
