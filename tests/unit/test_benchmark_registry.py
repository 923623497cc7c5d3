"""One benchmark, one object (benchmarks/benchmark.py, the registry in benchmarks/__init__.py).

- No module under harness/ names a benchmark: what a benchmark is lives in its object, so adding
  one never means editing the harness. An AST scan of every identifier and string literal (not
  docstrings or comments) for any name the installed mlperf-logging or the registry knows,
  aliases included; the exceptions below say why each is allowed.
- Every lazy reference of every registered implementation resolves to a callable (a renamed
  training function fails here, not in a rank after the run started).
- A name resolves once, to the one object; a benchmark mlperf-logging lists but the harness does
  not run, and a name nothing knows, are each one line.

What fails these: a `if bench == "gpt3"` (or a per-name table) added under harness/, a lazy target
that names a moved function, a second alias table that drifts from benchmark.yaml's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import benchmarks
from harness.core.errors import ConfigError
from harness.core.rulesets import all_benchmarks

REPO = Path(__file__).resolve().parents[2]

# (module, name) -> why the harness may name that benchmark there
ALLOWED = {
    (
        "harness/core/rulesets.py",
        "unet3d",
    ): "the official summarizer's own inline rule (olympic mean drops 4)",
    ("harness/core/rulesets.py", "maskrcnn"): "the official summarizer's folder alias (`mask` is maskrcnn)",
}


def _names() -> list[str]:
    names = set(all_benchmarks())
    for b in benchmarks.registered():
        names |= {b.name, *(a.lower() for a in b.rules.aliases)}
    return sorted(names, key=len, reverse=True)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of docstring constants: a module's, a class's, a function's, and an attribute's (a
    string statement right after an assignment)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for st in body:
                if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                    out.add(id(st.value))
    return out


def named_benchmarks(root: Path, names: list[str], base: Path = REPO) -> list[tuple[str, int, str, str]]:
    """(module, line, benchmark name, the text naming it) for every identifier, attribute, import,
    argument and string literal under `root` that names a benchmark as a whole word."""
    pat = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, names)) + r")(?![a-z0-9])")
    hits = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute | ast.FunctionDef | ast.ClassDef | ast.arg | ast.alias):
                text = getattr(node, "attr", None) or getattr(node, "name", None) or getattr(node, "arg", "")
            else:
                continue
            for m in pat.finditer(text.lower()):
                rel = str(path.relative_to(base))
                hits.append((rel, getattr(node, "lineno", 0), m.group(1), text[:80]))
    return hits


def test_no_module_under_harness_names_a_benchmark():
    hits = [h for h in named_benchmarks(REPO / "harness", _names()) if (h[0], h[2]) not in ALLOWED]
    assert hits == [], "\n".join(f"{m}:{line}: names {b!r} in {t!r}" for m, line, b, t in hits)


def test_the_scan_finds_a_planted_name(tmp_path):
    """The scan itself can fail: a per-name branch and a per-name table are both found, a
    docstring is not."""
    (tmp_path / "mod.py").write_text(
        '"""Docstrings may say gpt3."""\n'
        "def f(bench):\n"
        "    if bench.name == 'stable_diffusion':\n"
        "        return 1\n"
        "    return {'rgat': 2}.get(bench.name)\n"
        "def gnn_count(): ...\n"
    )
    found = {(b, line) for _, line, b, _ in named_benchmarks(tmp_path, _names(), base=tmp_path)}
    assert found == {("stable_diffusion", 3), ("rgat", 5), ("gnn", 6)}


@pytest.mark.parametrize("name", benchmarks.runs())  # the ones without an implementation have none
def test_every_lazy_reference_resolves_to_a_callable(name):
    impl = benchmarks.get(name).impl
    assert impl is not None
    for field, ref in impl.targets().items():
        assert callable(ref.resolve()), f"{name}.impl.{field} -> {ref.target}"


def test_a_name_resolves_once_to_the_one_object():
    gpt3 = benchmarks.get("gpt3")
    assert benchmarks.get("GPT-3") is gpt3 and benchmarks.get(" gpt3-175b ") is gpt3
    assert benchmarks.get("sdv2") is benchmarks.get("stable-diffusion") is benchmarks.get("sd")
    assert benchmarks.get("rgat").name == "gnn"
    for b in benchmarks.registered():
        assert b.rules.name == b.name == b.folder.name and b.configs_dir.is_dir()


@pytest.mark.parametrize("name", ["qwen35_397b_grpo", "deepseekv3_671b"])
def test_a_benchmark_the_harness_does_not_run_is_one_true_line(name):
    if name in benchmarks.available():
        pytest.skip(f"{name} is implemented now")
    with pytest.raises(ConfigError) as e:
        benchmarks.get(name)
    msg = str(e.value)
    assert "\n" not in msg and f"does not run '{name}'" in msg and "6.1.0" in msg
    assert "`mlperf check` and `mlperf results` read its logs" in msg


def test_a_name_nothing_knows_lists_the_known_ones_and_suggests_only_a_close_one():
    with pytest.raises(ConfigError, match=r"unknown benchmark 'gtp3' \(did you mean 'gpt3'\?\); known: gpt3"):
        benchmarks.get("gtp3")
    with pytest.raises(ConfigError) as e:
        benchmarks.get("zzz")
    assert "did you mean" not in str(e.value) and "known: gpt3" in str(e.value)


def test_the_scratch_registry_forgets_what_was_registered_in_it():
    import dataclasses

    before = benchmarks.available()
    with benchmarks.scratch():
        benchmarks.register(dataclasses.replace(benchmarks.get("gpt3"), name="scratch_copy"))
        assert "scratch_copy" in benchmarks.available()
        with pytest.raises(ConfigError, match="registered already"):
            benchmarks.register(dataclasses.replace(benchmarks.get("gpt3")))
    assert benchmarks.available() == before


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("llama3", "'llama31_8b'"),
        ("llama", "'llama2_70b_lora' or 'llama31_8b'"),
        ("lama2", "'llama2_70b_lora'"),
    ],
)
def test_a_prefix_suggests_every_benchmark_it_starts_and_each_once(typed, meant):
    """'llama3' is llama31_8b's prefix, not a misspelling of llama2 (the closest by spelling); its
    three aliases (llama31_8b, llama31-8b, llama3.1-8b) are one benchmark, named once."""
    with pytest.raises(ConfigError) as e:
        benchmarks.get(typed)
    assert f"(did you mean {meant}?)" in str(e.value)
