"""The table of bench/mutation.py: mutants, killed, survived (of them unreached), timeouts, the
share killed (timeouts count as killed), raw and without the equivalent mutants."""

from __future__ import annotations

from mutation_run import UNREACHED

HEAD = "mutants killed survived unreached timeout killed% equiv excl.eq%"


def score(rows: list[dict], equivalent: dict) -> tuple[int, int, int, int, int, int]:
    killed = sum(r["status"] == "killed" for r in rows)
    timeout = sum(r["status"] == "timeout" for r in rows)
    survived = [r for r in rows if r["status"] == "survived"]
    unreached = sum(r["by"] == UNREACHED for r in survived)
    equiv = sum(r["key"] in equivalent for r in survived)
    return len(rows), killed, len(survived), unreached, timeout, equiv


def line(name: str, s: tuple) -> str:
    n, killed, survived, unreached, timeout, equiv = s
    raw = 100 * (killed + timeout) / n if n else 0.0
    excl = 100 * (killed + timeout) / (n - equiv) if n > equiv else 0.0
    cols = f"{n:7d} {killed:6d} {survived:8d} {unreached:9d} {timeout:7d} {raw:7.1f} {equiv:5d} {excl:7.1f}"
    return f"{name:40s} {cols}"


def report(
    groups: dict, results: dict[str, list[dict]], skipped: dict[str, str], equivalent: dict, survivors: bool
):
    """Per module, per group and in total; the survivors, each with its key, if asked."""
    print(f"\n{'module':40s} {HEAD}")
    everything = []
    for group, modules in groups.items():
        rows = [r for m in modules for r in results.get(m, [])]
        if not rows:
            continue
        for m in modules:
            if m in results:
                print(line(m, score(results[m], equivalent)))
        print(line(f"  [{group}]", score(rows, equivalent)))
        everything += rows
    print(line("TOTAL", score(everything, equivalent)))
    for m, why in skipped.items():
        print(f"skipped {m}: {why}")
    stale = [k for k in equivalent if any(r["key"] == k and r["status"] != "survived" for r in everything)]
    for k in stale:
        print(f"listed as equivalent but killed (remove it from mutation_equivalent.yaml): {k}")
    if survivors:
        print("\nsurvivors (file:line operator: original -> mutated):")
        for r in everything:
            if r["status"] == "survived":
                tag = " [equivalent]" if r["key"] in equivalent else ""
                tag += " [unreached]" if r["by"] == UNREACHED else ""
                print(f"{r['path']}:{r['line']} {r['op']}: {r['original']} -> {r['mutated']}{tag}")
                print(f"    key: {r['key']}")
