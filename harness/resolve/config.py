"""Resolve a benchmark's config for (size, system, --set) and remember where each value came from.

Precedence, lowest first:
  1. default      the field defaults in benchmarks/<name>/config.py (the reference, full size)
  2. size         benchmarks/<name>/configs/tiny.yaml when --size tiny
  3. system       benchmarks/<name>/configs/<system>.yaml (absent: <the descriptor's tuned_config>.yaml)
                  when its `size:` matches, else (full size) the planner's best layout for the system
  4. --set        key=value from the command line (YAML scalars)
Values the config computes itself (e.g. gpt3 warmup steps from the batch size) are 'derived'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

import benchmarks
from benchmarks.base import BenchmarkConfig
from benchmarks.benchmark import Benchmark
from harness.core.errors import ConfigError, suggest
from harness.core.schema import load_yaml, validate

CONFIG_FILE_KEYS = {"size", "config"}


def parse_sets(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        k, v = pair.split("=", 1)
        try:
            out[k.strip()] = yaml.safe_load(v) if v.strip() else ""
        except yaml.YAMLError:
            out[k.strip()] = v
    return out


def _config_file(path: Path, size: str) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data = load_yaml(path)
    unknown = set(data) - CONFIG_FILE_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise ConfigError(
            f"{path}: unknown top-level key '{k}'{suggest(k, CONFIG_FILE_KEYS)}; settings go under 'config:'"
        )
    if data.get("size", "full") != size:
        return None
    cfg = data.get("config") or {}
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: 'config' must be a mapping of key: value")
    return cfg


def resolve(
    bench: Benchmark,
    size: str,
    system_name: str,
    division: str,
    overrides: dict[str, Any],
    fallback=None,
    closed: dict[str, tuple[tuple | None, str, str]] | None = None,
    ruleset: str | None = None,
    tuned_config: str | None = None,
) -> tuple[BenchmarkConfig, dict[str, str], list[str]]:
    """(config, provenance, sources) for one benchmark; raises ConfigError on any bad key/value.
    `tuned_config`: the descriptor's shipped system whose config stands in when none is named
    after `system_name` (systems.py SystemSpec.tuned_config).
    `closed`: log key -> (allowed values, rule, rule file) of the closed division at this ruleset
    and size (benchmarks/tiny_rules.py closed_values; computed here when not given, under
    `ruleset` or the benchmark's default); a --set outside them is refused."""
    if closed is None:
        from benchmarks.tiny_rules import closed_values
        from harness.core.rulesets import for_run

        closed = closed_values(bench, ruleset or for_run(bench.official)[0], size)
    defn = bench.rules
    cls = bench.config
    fields = set(cls.model_fields)
    layers: list[tuple[str, dict[str, Any]]] = []
    files: list[str] = []
    folder = bench.configs_dir
    if size == "tiny":
        tiny = _config_file(folder / "tiny.yaml", "tiny")
        if tiny is None:
            raise ConfigError(f"{bench.name} has no tiny size ({rel(folder / 'tiny.yaml')} is missing)")
        layers.append(("size:tiny", tiny))
        files.append(rel(folder / "tiny.yaml"))
    sys_file, tuned_name = folder / f"{system_name}.yaml", system_name
    if tuned_config and not sys_file.exists():
        sys_file, tuned_name = folder / f"{tuned_config}.yaml", tuned_config
    tuned = _config_file(sys_file, size)
    if tuned is not None:
        layers.append((f"system:{tuned_name}", tuned))
        files.append(rel(sys_file))
    elif size == "full" and fallback is not None:
        # No config tuned for this system: the planner's best layout (`mlperf plan`) fills the gap.
        layers.append(("planner", fallback(overrides)))
        files.append(f"`mlperf plan {bench.name} --system {system_name}`")

    # --set: unknown keys and fixed closed-division hyperparameters are refused up front.
    for k, v in overrides.items():
        if k not in fields:
            raise ConfigError(
                f"--set {k}: unknown key for {bench.name}{suggest(k, fields)}; "
                f"see `mlperf run {bench.name} --dry-run` for all keys"
            )
        allowed, _rule, where = closed.get(k, (None, "", ""))
        # Closed division: every closed value. An open tiny run (cpu-local): the fixed ones only,
        # so a tiny log keeps the reference's shape, while a tunable one (the learning rate an
        # `mlperf lr-find` suggests) may leave the rules' choices; `mlperf check` then says so.
        binding = division == "closed" or (size == "tiny" and k not in defn.tunable)
        if allowed is not None and binding and v not in allowed:
            one = str(allowed[0]) if len(allowed) == 1 else "one of " + ", ".join(map(str, allowed))
            raise ConfigError(
                f"--set {k}={v}: '{k}' is fixed at {one} by the closed-division rules of {bench.official} "
                f"(ruleset {ruleset}, {where}); only an open-division full-size run may change it"
            )
    if overrides:
        layers.append(("--set", overrides))

    merged: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for source, values in layers:
        for k, v in values.items():
            if k not in fields:
                raise ConfigError(f"{source}: unknown key '{k}'{suggest(k, fields)}")
            merged[k] = v
            provenance[k] = source
    cfg = validate(cls, merged, f"{bench.name} config")
    for k in fields:
        if k not in provenance:
            default = cls.model_fields[k].default
            provenance[k] = "default" if getattr(cfg, k) == default else "derived"
    return cfg, provenance, [f"{s} ({f})" for (s, _), f in zip(layers, files + ["command line"])]


def rel(p: Path) -> str:
    """A path under the repository as the user sees it in this repository (benchmarks/...)."""
    try:
        return str(p.relative_to(benchmarks.ROOT.parent))
    except ValueError:
        return str(p)
