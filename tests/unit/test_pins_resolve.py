"""How `mlperf run` resolves a benchmark's config (harness/resolve/config.py): --set parsing, which
config files apply, the planner's layout where no file is tuned, and the one-line refusals of bad
files and keys. Found unpinned by bench/mutation.py. A scratch copy of gpt3's folder stands in for
a benchmark with odd config files."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

import benchmarks
from harness.core.errors import ConfigError
from harness.resolve import config as R

GPT3 = benchmarks.get("gpt3")


def _resolve(bench=GPT3, size="tiny", system="cpu-local", sets=None, **kw):
    return R.resolve(bench, size, system, "open", sets or {}, **kw)


def _scratch(tmp_path: Path, **files: str):
    """gpt3 from a copy of its folder whose configs/ holds `files` (name -> text) instead."""
    folder = tmp_path / "gpt3"
    shutil.copytree(GPT3.folder, folder, ignore=shutil.ignore_patterns("configs", "__pycache__"))
    (folder / "configs").mkdir()
    for name, text in files.items():
        (folder / "configs" / name).write_text(text)
    return dataclasses.replace(GPT3, folder=folder)


def test_set_values_are_yaml_scalars_and_keep_their_equals_signs():
    got = R.parse_sets(["seed=7", "opt_name=adam=w", "x=", "tag=[unclosed", " lr = 0.5"])
    assert got == {"seed": 7, "opt_name": "adam=w", "x": "", "tag": "[unclosed", "lr": 0.5}
    with pytest.raises(ConfigError, match=r"^--set 'seed': expected key=value$"):
        R.parse_sets(["seed"])


def test_a_full_size_file_does_not_apply_to_a_tiny_run():
    cfg, prov, sources = _resolve(system="dgx-h100x64")  # configs/dgx-h100x64.yaml is full size
    assert sources == ["size:tiny (benchmarks/gpt3/configs/tiny.yaml)"]
    assert prov["global_batch_size"] == "size:tiny" and cfg.num_layers == 2


def test_an_untuned_system_gets_the_planners_layout_at_full_size():
    cfg, prov, sources = _resolve(
        size="full",
        system="nowhere",
        fallback=lambda sets: {"tensor_model_parallel_size": 8, "global_batch_size": 2048},
    )
    assert sources == ["planner (`mlperf plan gpt3 --system nowhere`)"]
    assert cfg.tensor_model_parallel_size == 8 and prov["tensor_model_parallel_size"] == "planner"
    _cfg, _prov, sources = _resolve(size="full", system="dgx-h100x64", fallback=lambda sets: {})
    assert sources == ["system:dgx-h100x64 (benchmarks/gpt3/configs/dgx-h100x64.yaml)"]  # tuned wins


def test_an_unknown_set_key_is_one_line():
    with pytest.raises(ConfigError) as e:
        _resolve(sets={"num_layer": 4})
    assert str(e.value).startswith("--set num_layer: unknown key for gpt3")
    assert str(e.value).endswith("see `mlperf run gpt3 --dry-run` for all keys")


@pytest.mark.parametrize(
    "text,message",
    [
        ("size: tiny\nconfg: {}\n", r"unknown top-level key 'confg'.*; settings go under 'config:'$"),
        ("size: tiny\nconfig: [1, 2]\n", r"'config' must be a mapping of key: value$"),
        ("size: tiny\nconfig:\n  num_layer: 4\n", r"^size:tiny: unknown key 'num_layer'"),
    ],
)
def test_a_bad_config_file_is_one_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _resolve(_scratch(tmp_path, **{"tiny.yaml": text}))


def test_a_benchmark_without_a_tiny_size(tmp_path):
    bench = _scratch(tmp_path)
    with pytest.raises(ConfigError) as e:
        _resolve(bench)
    # outside the repository the path is shown in full
    assert str(e.value) == f"{bench.configs_dir / 'tiny.yaml'}: cannot read (No such file or directory)"


def test_a_config_file_outside_the_repository_is_named_in_full(tmp_path):
    bench = _scratch(tmp_path, **{"tiny.yaml": (GPT3.configs_dir / "tiny.yaml").read_text()})
    _cfg, _prov, sources = _resolve(bench)
    assert sources == [f"size:tiny ({bench.configs_dir / 'tiny.yaml'})"]
