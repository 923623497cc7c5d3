"""One PREPARED.json shape for every benchmark (harness/core/data_manifest.py DataManifest), checked
torch-free as the CLI checks it: a tiny file corrupted without changing its size makes `is_prepared`
False (so `mlperf run` prepares it again and gpt3's ranks refuse with one line), full data stays
size-checked, and a folder of an older manifest format or data version is prepared again instead
of failing.

What fails these: a size-only check at tiny size (the flipped byte trains), a manifest that does
not record its format/version (an old folder passes), one benchmark with a writer of its own."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import benchmarks
from harness.core import data_manifest

BENCHES = benchmarks.runs()  # the ones with an implementation: its DataManifest


def _plan(tmp_path, bench: str, size: str = "tiny"):
    b = benchmarks.get(bench)
    config = {k: 1 for k in b.impl.data.fields + b.impl.data.tiny_fields}
    return SimpleNamespace(benchmark=bench, size=size, data_dir=str(tmp_path), config=config)


def _files(tmp_path):
    files = [tmp_path / "a.bin", tmp_path / "sub" / "b.bin"]
    for i, f in enumerate(files):
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(bytes(range(256)) * (10 + i))
    return files


@pytest.mark.parametrize("bench", BENCHES)
def test_a_flipped_byte_of_the_same_size_is_not_prepared(tmp_path, bench):
    plan, files = _plan(tmp_path, bench), _files(tmp_path)
    m = benchmarks.get(bench).impl.data
    m.write(plan, files, {"fact": 1})
    assert m.is_prepared(plan)
    doc = json.loads((tmp_path / data_manifest.MANIFEST).read_text())
    assert set(doc) == {"format", "benchmark", "size", "version", "fields", "files", "facts"}
    assert all(len(e["sha256"]) == 64 for e in doc["files"].values()) and doc["facts"] == {"fact": 1}
    data = bytearray(files[1].read_bytes())
    data[100] ^= 0x01  # one bit, same size: what a size-only check lets train
    files[1].write_bytes(bytes(data))
    assert not m.is_prepared(plan)


@pytest.mark.parametrize("bench", BENCHES)
def test_full_data_is_checked_by_size_and_a_changed_field_is_not_prepared(tmp_path, bench):
    plan, files = _plan(tmp_path, bench, "full"), _files(tmp_path)
    m = benchmarks.get(bench).impl.data
    m.write(plan, files)
    assert m.is_prepared(plan)
    assert "sha256" not in json.loads((tmp_path / data_manifest.MANIFEST).read_text())["files"]["a.bin"]
    if m.fields:
        other = SimpleNamespace(**{**vars(plan), "config": {**plan.config, m.fields[0]: 2}})
        assert not m.is_prepared(other)
    files[0].write_bytes(b"shorter")
    assert not m.is_prepared(plan)


def test_an_older_format_or_data_version_is_prepared_again(tmp_path):
    """Format 1 (the three per-benchmark shapes before) and a bumped data version both read as
    'not prepared': `mlperf run` then prepares the folder again rather than failing on it."""
    import dataclasses

    plan, files = _plan(tmp_path, "gpt3"), _files(tmp_path)
    m = benchmarks.get("gpt3").impl.data
    m.write(plan, files)
    assert m.is_prepared(plan)
    assert not dataclasses.replace(m, version=m.version + 1).is_prepared(plan)
    path = tmp_path / data_manifest.MANIFEST
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "format": "mlperf-harness/gpt3-tiny/1"}))
    assert not m.is_prepared(plan)
    path.write_text(json.dumps({"format": 1, "benchmark": "gnn", "fields": {}, "files": old["files"]}))
    assert not m.is_prepared(plan)


def test_a_manifest_that_lists_nothing_proves_nothing(tmp_path):
    plan = _plan(tmp_path, "gnn")
    m = benchmarks.get("gnn").impl.data
    m.write(plan, [])
    assert not m.is_prepared(plan)
