"""Tiny data manifests verify sha256: a prepared tiny file corrupted without changing its size
makes `is_prepared` False for every benchmark (so `mlperf run` prepares it again and gpt3's ranks
refuse with one line), while full data stays size-checked. Torch-free, like the CLI's check."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from reference_impls.gnn import manifest as gnn
from reference_impls.gpt3 import manifest as gpt3
from reference_impls.llama2_70b_lora import manifest as llama2
from reference_impls.stable_diffusion import manifest as sd

MANIFESTS = {"gpt3": gpt3, "gnn": gnn, "llama2_70b_lora": llama2, "stable_diffusion": sd}


def _write(bench: str, plan, files: list[Path]) -> None:
    """Each benchmark's own manifest writer, as its `prepare` calls it at tiny size."""
    if bench == "gpt3":
        gpt3.write(Path(plan.data_dir), [f.name for f in files], plan.config, {})
    elif bench == "llama2_70b_lora":
        llama2.write(plan, files, {})
    else:
        MANIFESTS[bench].write(plan, files, hash_files=True)


@pytest.mark.parametrize("bench", sorted(MANIFESTS))
def test_a_flipped_byte_of_the_same_size_is_not_prepared(tmp_path, bench):
    plan = SimpleNamespace(benchmark=bench, size="tiny", data_dir=str(tmp_path), config={})
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for i, f in enumerate(files):
        f.write_bytes(bytes(range(256)) * (10 + i))
    _write(bench, plan, files)
    m = MANIFESTS[bench]
    assert m.is_prepared(plan)
    data = bytearray(files[1].read_bytes())
    data[100] ^= 0x01  # one bit, same size: what the size-only check let train
    files[1].write_bytes(bytes(data))
    assert files[1].stat().st_size == len(data)
    assert not m.is_prepared(plan)
