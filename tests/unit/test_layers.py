"""The architecture as a contract (NOTES.md, "Layers"): every import between the project's modules,
lazy ones inside functions included, goes one way, and there is no import circle anywhere.

An equivalent of import-linter's `layers`/`independence` contracts, over the AST so that imports
inside functions count too (import-linter sees those only when they run). The checker itself is
tested on a small tree with a wrong-way import, so this test can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "benchmarks", "reference_impls", "systems")

# layer -> the layers it may import (besides itself)
ALLOWED = {
    "commands": {"run", "review", "planner", "resolve", "core", "benchmarks"},
    "run": {"planner", "resolve", "core", "benchmarks"},
    "review": {"core", "benchmarks"},
    "planner": {"resolve", "core", "benchmarks"},
    "resolve": {"core", "benchmarks"},
    # reference_impls/<name>/: the in-rank training code; the registry (benchmarks/) names it only
    # by lazy "module:attr" strings, never by an import, so nothing above imports it
    "impl": {"train", "core", "benchmarks"},
    "train": {"core"},
    "benchmarks": {"core"},
    "core": set(),
    "systems": set(),
}


# reference_impls modules that are no benchmark's code but serve several (NOTES.md): any
# benchmark's code may import them; they import no benchmark's code.
SHARED_IMPL = {"tiny_images"}


def layer(mod: str) -> str:
    parts = mod.split(".")
    if parts[0] == "harness":
        if len(parts) == 1:
            return "core"  # harness/__init__.py: the version string only
        if parts[1] in ("cli", "commands"):
            return "commands"
        return {"run": "run", "review": "review", "planner": "planner", "resolve": "resolve"}.get(
            parts[1], {"train": "train", "core": "core"}.get(parts[1], "unknown")
        )
    if parts[0] == "reference_impls":
        return "impl"
    return parts[0]


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules `mod` imports anywhere in its body (module level and inside functions)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import a.b.c` of a package path: nearest module
                name = name.rpartition(".")[0]
            if name and name != mod:
                out.add(name)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imports(m, p, known) for m, p in known.items()}


def violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(g.items()):
        src = layer(mod)
        for dep in sorted(deps):
            dst = layer(dep)
            if src == "unknown" or dst == "unknown":
                bad.append(f"{mod} -> {dep}: a module outside the layers (add it to NOTES.md and this test)")
            elif dst != src and dst not in ALLOWED[src]:
                bad.append(f"{mod} ({src}) -> {dep} ({dst}): wrong-way import")
            elif src == dst == "impl" and mod.split(".")[1] != dep.split(".")[1] not in SHARED_IMPL:
                bad.append(f"{mod} -> {dep}: one benchmark's code imports another's")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_import_goes_the_allowed_way():
    assert violations(graph(REPO)) == []


def test_there_is_no_import_circle_lazy_imports_included():
    assert cycles(graph(REPO)) == []


def test_the_contract_catches_a_wrong_way_import_and_a_circle(tmp_path):
    """The checker on a small tree: review importing run, and core <-> resolve in a circle."""
    files = {
        "harness/__init__.py": "",
        "harness/core/__init__.py": "",
        "harness/core/errors.py": "def f():\n    from harness.resolve import systems\n",
        "harness/resolve/__init__.py": "",
        "harness/resolve/systems.py": "from harness.core.errors import f\n",
        "harness/run/__init__.py": "",
        "harness/run/execute.py": "",
        "harness/review/__init__.py": "",
        "harness/review/score.py": "from harness.run import execute\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    g = graph(tmp_path)
    bad = violations(g)
    assert any("harness.review.score (review) -> harness.run.execute (run)" in b for b in bad)
    assert any("harness.core.errors (core) -> harness.resolve.systems (resolve)" in b for b in bad)
    assert cycles(g) == [["harness.core.errors", "harness.resolve.systems"]]


def test_only_the_commands_print():
    """Outside harness/commands/ (and the in-rank library, whose output goes to the run's log
    files), nothing writes to the terminal: no print, click.echo or rich Console."""
    found = []
    for mod, path in modules(REPO).items():
        if not mod.startswith("harness.") or layer(mod) in ("commands", "train"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in ("print", "echo", "secho", "Console"):
                    found.append(f"{mod}:{node.lineno} {name}")
    assert found == []
