"""A switch whose code imports a library (`Switch.library`) that is not installed is refused by
`mlperf run` with one line, exit 2, before anything is written or launched; `--dry-run` only notes
it, so every shipped config still dry-runs on a CPU box. (Before: the rank refused it after
run_start, and the run came back as 'target not reached', exit 3.)"""

from __future__ import annotations

import pytest

import benchmarks
from harness import cli
from harness.resolve import switches


def _mlperf(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli.main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.fixture
def nothing_installed(monkeypatch):
    monkeypatch.setattr(switches, "find_spec", lambda name: None)


# NVIDIA's record switches, which the shipped config turns off until a GPU measurement shows them
# faster (docs/gpu/speed_evidence.yaml)
RECORD = ("--set", "fp8=true", "--set", "tp_comm_overlap=true")


def test_run_refuses_a_switch_whose_library_is_missing_before_writing_anything(
    nothing_installed, tmp_path, capsys
):
    results = tmp_path / "results"
    rc, out, err = _mlperf(
        capsys, "run", "gpt3", "--system", "dgx-h100x64", *RECORD, "--results-dir", str(results)
    )
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        "error: fp8=true, tp_comm_overlap=true need transformer_engine, which is not installed here; "
        "install it (docs/install-gpu.md) or --set fp8=false --set tp_comm_overlap=false"
    ]
    assert not results.exists()  # no plan, no system JSON, no prepared data: nothing was launched


def test_dry_run_notes_it_and_exits_0(nothing_installed, tmp_path, capsys):
    args = (
        "run",
        "gpt3",
        "--system",
        "dgx-h100x64",
        *RECORD,
        "--dry-run",
        "--results-dir",
        str(tmp_path / "r"),
    )
    rc, out, _ = _mlperf(capsys, *args)
    assert rc == 0
    assert "would be refused here: transformer_engine is not installed (fp8, tp_comm_overlap)" in out


def test_every_library_switch_is_found_and_installed_ones_pass(monkeypatch):
    from benchmarks import get

    libs = {
        (b, k): s.library
        for b in ("gpt3", "llama2_70b_lora", "gnn", "stable_diffusion")
        for k, s in get(b).config.SWITCHES.items()
        if s.library
    }
    assert libs == {
        ("gpt3", "fp8"): "transformer_engine",
        ("gpt3", "cuda_graphs"): "transformer_engine",
        ("gpt3", "tp_comm_overlap"): "transformer_engine",
        ("llama2_70b_lora", "fp8"): "torchao",
        ("stable_diffusion", "cuda_graphs"): "triton",
    }
    cfg = {"fp8": True, "cuda_graphs": False, "context_parallel_size": 2}
    monkeypatch.setattr(switches, "find_spec", lambda name: None)
    assert switches.missing_libraries(benchmarks.get("gpt3"), cfg) == {"transformer_engine": [("fp8", False)]}
    monkeypatch.setattr(switches, "find_spec", lambda name: object())
    assert switches.missing_libraries(benchmarks.get("gpt3"), cfg) == {}
    switches.require_libraries(benchmarks.get("gpt3"), cfg)  # no error
