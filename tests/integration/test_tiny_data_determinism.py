"""Every runnable benchmark's tiny data is byte-identical from one preparation to the next, whatever
state the process's global random generators start in.

For each benchmark the repository ships, `prepare` runs twice, each in a fresh process started the
way `mlperf prepare` starts it (`python -m <impl> --plan prepare.plan.json`), but through
tests/prepare_seeded.py, which seeds Python's, NumPy's and torch's global generators (and
PYTHONHASHSEED) with a different value in each process. The two PREPARED.json manifests must list
the same files with the same sha256.

The defect caught: a generator in a benchmark's prepare that is not seeded from the config (a
`random.Random()`, a `torch.randn` or `np.random.rand` on the global generator, an iteration over a
set of strings). A fresh torch process's global generator starts from the same seed every time, so
two plain preparations would agree and hide it; the tiny data, and every figure calibrated on it,
would then depend on what else ran in the process first. Configs are shrunk by CHEAP (fewer
pretraining steps) without changing which code runs: an unseeded draw shows at the first step.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import helpers
import pytest

import benchmarks
from harness.core import data_manifest
from harness.resolve.runplans import runnable

pytestmark = pytest.mark.slow

WRAPPER = Path(__file__).resolve().parents[1] / "prepare_seeded.py"
SEEDS = (11, 12)
"""The global generators' seeds of the two preparations (any two different values)."""

CHEAP: dict[str, list[str]] = {
    # The tiny checkpoint's pretraining: 2 steps instead of 150 (init_checkpoint_step follows).
    "gpt3": ["reference_checkpoint_step=2"],
    # The tiny base's pretraining: 3 steps instead of 150.
    "llama2_70b_lora": ["tiny_pretrain_steps=3"],
    # Nothing: a tiny prepare takes about 3 s.
    "gnn": [],
    # Nothing: the corpus only (pretraining from scratch: no checkpoint to pretrain).
    "llama31_8b": [],
    # Nothing: the same corpus as llama31_8b's (from scratch too).
    "gpt_oss_20b": [],
    # The starting checkpoint's pretraining: 2 steps instead of 24 (weights only).
    "deepseekv3_671b": ["tiny_start_steps=2"],
    # The tiny 16-channel VAE: 2 steps instead of 150.
    "flux1": ["tiny_vae_steps=2"],
    # The tiny VAE and the FID/CLIP classifier: 2 steps each instead of 150 and 300.
    "stable_diffusion": ["tiny_vae_steps=2", "tiny_classifier_steps=2"],
}
"""Per benchmark, the `--set`s that make its tiny prepare quick without changing which code runs."""


def shipped() -> list[str]:
    """The runnable benchmarks the repository ships (benchmarks/<name>/): not a test's scratch toy
    or renamed copy (benchmarks.scratch)."""
    return [
        b.name for b in benchmarks.registered() if b.impl is not None and b.folder == benchmarks.ROOT / b.name
    ]


def test_every_runnable_benchmark_says_how_to_prepare_cheaply():
    missing = [b for b in shipped() if b not in CHEAP]
    assert not missing, (
        f"CHEAP has no entry for {missing}: add the --sets that make its tiny prepare quick ([] if none)"
    )


def _start(bench: str, root: Path, seed: int):
    """The plan of one tiny preparation into root/data, and its prepare process (started)."""
    plan = helpers.make_plan(bench, root, data_dir=root / "data", sets=CHEAP[bench])
    plan_path = helpers.plan_file(plan, task="prepare")
    # As the local launcher's environment for prepare (harness/run/launch/local.py: _env, cpu_only).
    env = dict(
        helpers.env(),
        OMP_NUM_THREADS=str(plan.threads_per_process),
        CUDA_VISIBLE_DEVICES="",
        HF_HUB_OFFLINE="1",
        PYTHONHASHSEED=str(seed),
    )
    module = runnable(benchmarks.get(bench)).module
    argv = [sys.executable, str(WRAPPER), str(seed), module, "--plan", str(plan_path)]
    log = open(root / "prepare.log", "wb")  # noqa: SIM115  (closed once the process ends)
    proc = subprocess.Popen(argv, cwd=helpers.REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    return plan, proc, log


@pytest.mark.parametrize("bench", shipped())
def test_two_preparations_write_the_same_bytes(bench, tmp_path):
    # The two processes run side by side (one thread each): the module's wall time is halved.
    started, codes = [], []
    try:
        for i, seed in enumerate(SEEDS):
            started.append(_start(bench, tmp_path / f"prepare{i}", seed))
        codes = [proc.wait(timeout=300) for _, proc, _ in started]
    finally:
        for _, proc, log in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    for (plan, _, log), rc in zip(started, codes, strict=True):
        tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-20:]
        assert rc == 0, f"{bench}: prepare into {plan.data_dir} exited {rc}:\n" + "\n".join(tail)
    data = runnable(benchmarks.get(bench)).data
    files = []
    for plan, _, _ in started:
        manifest = data_manifest.read(plan.data_dir)
        assert manifest and data.is_prepared(plan), (
            f"{bench}: {plan.data_dir} is not prepared (PREPARED.json)"
        )
        files.append(manifest["files"])
    a, b = files
    differ = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
    assert not differ, (
        f"{bench}: two preparations (global RNGs seeded {SEEDS[0]} and {SEEDS[1]}) wrote different "
        f"bytes in {differ}: an unseeded generator in its prepare?"
    )
