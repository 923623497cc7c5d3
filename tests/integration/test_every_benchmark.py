"""Two defects no single benchmark's own tests caught, checked the same way for every benchmark
that runs: gradient accumulation and the evaluation's data.

For each benchmark two tiny runs of the same seed and global batch, one at GA 1 and one at GA 2
(micro-batch halved), are compared at the first logged training loss and the first evaluation. The
run on the poisoned split stops there (CASES.stop: `max_steps` or the benchmark's cap); the clean
one is the benchmark's shared uninterrupted run where its test module makes one (gpt3's quick-start
run, gnn's plain run: CASES.shared), else a second short run:
- **GA.** The training loss logged at that step agrees between the two to GA_RTOL. A loss that is
  not divided by the accumulation count is summed over the micro-batches instead of averaged: the
  GA 2 run logs twice the loss (and steps with twice the gradient).
- **Validation split.** The GA 2 run reads a copy of the prepared data whose validation split is
  poisoned (POISON: labels or reference statistics scrambled, training files untouched), so its
  first evaluation must be far worse than the clean run's at the same step. A loop that evaluates
  on training data (or on anything but the validation files) scores the same on both.
A benchmark added later needs a CASES and a POISON entry (test_every_runnable_benchmark_has_a_case).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    REPO,
    SHARED_SEED,
    env,
    events,
    mlperf_argv,
    prepared_once,
    shared_data,
    shared_run,
    uninterrupted_run,
)

import benchmarks
from harness.core import data_manifest
from harness.core.runfolder import read_timings

pytestmark = pytest.mark.slow  # trains: not in the -m 'not slow' loop

# Why 0.25: the two runs see the same samples from the same initial weights; GA only changes how
# they are split and summed (and, for gnn and SD, which neighbours / noise the generator draws for
# each half). Measured at these first losses (2026-12-06, seed 7 for all four): gpt3 0 (equal to 6 digits),
# llama2 0.1 %, SD 0.3 % (0.9 % with its former 0.79 M UNet), gnn 6 % (the last micro-batch's
# loss, 128 vs 256 papers). A loss not divided by GA is 100 % off. The poisoned first evaluations, same runs: gpt3 log-perplexity 1.27 ->
# 9.99, llama2 eval loss 3.60 -> 7.11, gnn accuracy 0.196 -> 0.045, SD FID 830 -> 330,658: far
# beyond the 10 % asserted.
GA_RTOL = 0.25


@dataclass(frozen=True)
class Case:
    clean: tuple[str, ...]
    """--set values of the clean short run (besides `stop`): the shipped GA."""
    poisoned: tuple[str, ...]
    """--set values of the run on the poisoned split: the other GA (micro-batch halved or doubled,
    the global batch unchanged)."""
    stop: tuple[str, ...]
    """--set values that end a short run right after its first logged loss and evaluation."""
    metric: str
    """The eval_accuracy whose first value the poisoned run must fail (FID/CLIP: the metadata's)."""
    seed: int = SHARED_SEED
    """Both runs' seed (a shared run's own)."""
    shared: bool = False
    """The clean run is the benchmark's shared one (at the shipped GA: _shared), not a short one."""


CASES = {
    # GBS 16: MBS 16 (GA 1) / 8 (GA 2); an eval (and the loss) every 12 steps; clean: the quick start's seed 3
    "gpt3": Case((), ("micro_batch_size=8",), ("max_steps=12",), "log_perplexity", seed=3, shared=True),
    # GBS 8: MBS 8 / 4; an eval every 12 steps, the first one kept (the rules skip 3)
    "llama2_70b_lora": Case((), ("micro_batch_size=4",), ("max_steps=12", "skip_evals=0"), "eval_loss"),
    # GBS 256: MBS 256 / 128 (the shipped GA 2); 46 steps an epoch, 0.05 epoch = 3 steps, an eval
    # there; clean: test_gnn_tiny's plain run (seed 11, GA 2), so the poisoned one runs at GA 1
    "gnn": Case((), ("micro_batch_size=256",), ("max_epochs=0.05",), "accuracy", seed=11, shared=True),
    # GBS 32: MBS 32 / 16; the loss is read back at a UNet checkpoint, here the first one at 1,600
    # images (50 steps, the shipped cadence), scored there (eval_start_images, shipped 9,600) with 2
    # sampling steps instead of 4 (both runs alike), then the cap ends it
    # GBS 16: MBS 16 / 8; an eval every 12 steps; clean: test_llama31_tiny's uninterrupted run (seed 7)
    "llama31_8b": Case((), ("micro_batch_size=8",), ("stop_after_steps=12",), "log_perplexity", shared=True),
    # GBS 32: MBS 32 / 16; an eval (and the loss) every 32 steps, the cap ends it there; clean:
    # test_flux1_tiny's uninterrupted run (seed 7)
    "flux1": Case((), ("micro_batch_size=16",), ("train_samples_cap=1024",), "validation_loss", shared=True),
    # GBS 16: MBS 16 / 8; an eval every 12 steps; clean: test_gpt_oss_tiny's uninterrupted run (seed 7)
    "gpt_oss_20b": Case((), ("micro_batch_size=8",), ("stop_after_steps=12",), "log_perplexity", shared=True),
    # GBS 16: MBS 16 / 8; the first eval at 48 steps (tiny eval_first_samples 768), the stop there;
    # clean: test_deepseek_tiny's uninterrupted run (seed 7), from the prepared starting checkpoint
    "deepseekv3_671b": Case(
        (), ("micro_batch_size=8",), ("stop_after_steps=48",), "log_perplexity", shared=True
    ),
    "stable_diffusion": Case(
        (),
        ("micro_batch_size=16",),
        (
            "checkpoint_every_images=1600",
            "train_samples_cap=1600",
            "eval_start_images=1600",
            "sampling_steps=2",
        ),
        "FID",
    ),
}


def _poison_megatron(data: Path) -> None:
    """Shuffle the validation tokens (uint16 .bin; the .idx document lengths stay): the
    Megatron-GPT family's tiny corpus (gpt3, llama31_8b, gpt_oss_20b, deepseekv3_671b)."""
    from reference_impls.megatron_gpt.data import VALID_PREFIX

    path = data / f"{VALID_PREFIX}.bin"
    tokens = np.fromfile(path, dtype=np.uint16)
    np.random.default_rng(0).shuffle(tokens)
    tokens.tofile(path)


def _poison_llama2(data: Path) -> None:
    """Shuffle the answer tokens (labels != -100) across the whole validation file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reference_impls.llama2_70b_lora.data import EVAL_FILE, IGNORE

    (path,) = data.rglob(EVAL_FILE)
    table = pq.read_table(path)
    labels = table.column("labels").combine_chunks()
    values = labels.values.to_numpy(zero_copy_only=False).copy()
    answer = values != IGNORE
    values[answer] = np.random.default_rng(0).permutation(values[answer])
    poisoned = pa.ListArray.from_arrays(labels.offsets, pa.array(values, type=labels.type.value_type))
    pq.write_table(table.set_column(table.schema.get_field_index("labels"), "labels", poisoned), path)


def _poison_gnn(data: Path) -> None:
    """Shuffle the labels of the validation papers among themselves (training labels untouched)."""
    import torch

    (val,) = data.rglob("val_idx.pt")
    (labels_file,) = data.rglob("paper/node_label_*.npy")
    labels = np.load(labels_file)
    idx = torch.load(val).numpy()
    labels[idx] = np.random.default_rng(0).permutation(labels[idx])
    np.save(labels_file, labels)


def _poison_sd(data: Path) -> None:
    """Move the validation images' FID reference statistics far away (mean + 100 per feature)."""
    (path,) = data.rglob("val2014_tiny_stats.npz")
    stats = dict(np.load(path))
    np.savez(path, mu=stats["mu"] + 100.0, sigma=stats["sigma"])


def _poison_flux1(data: Path) -> None:
    """Flip and triple every validation latent's posterior mean (training rows untouched)."""
    import pyarrow as pa

    from reference_impls.flux1 import data as fd

    (state,) = [p for p in data.rglob(fd.STATE) if "val" in p.parent.name]
    (path,) = fd.arrow_files(state.parent, "poisoned")
    table = pa.ipc.open_stream(path.read_bytes()).read_all()  # in memory: the file is rewritten below
    means = [fd.npy_bf16(-3 * fd.decode(v.as_py())) for v in table.column("mean")]
    table = table.set_column(table.schema.get_field_index("mean"), "mean", pa.array(means, pa.binary()))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


POISON = {
    "flux1": _poison_flux1,
    "gpt3": _poison_megatron,
    "llama31_8b": _poison_megatron,
    "gpt_oss_20b": _poison_megatron,
    "deepseekv3_671b": _poison_megatron,
    "llama2_70b_lora": _poison_llama2,
    "gnn": _poison_gnn,
    "stable_diffusion": _poison_sd,
}


def _runnable() -> list[str]:
    return sorted(name for name in benchmarks.runs() if name in benchmarks.BUILTIN)


def test_every_runnable_benchmark_has_a_case():
    missing = [name for name in _runnable() if name not in CASES or name not in POISON]
    assert not missing, f"{missing}: add a CASES (GA 1 / GA 2 / stop) and a POISON entry here"


def _poisoned_copy(clean: Path, dest: Path, bench: str) -> Path:
    """A copy of the prepared data with the validation split poisoned, its manifest's sizes and
    hashes updated (a changed file is otherwise refused as not prepared)."""
    shutil.copytree(clean, dest)
    POISON[bench](dest)
    doc = data_manifest.read(dest)
    assert doc is not None
    doc["files"] = data_manifest.file_entries(dest, list(doc["files"]))
    data_manifest.write(dest, doc)
    return dest


# The once_per_run folders the benchmarks' own test modules prepare (same names, same content), so
# that a pytest run prepares each benchmark's tiny data once.
SHARED_DATA = {
    "llama2_70b_lora": ("llama2-data", ""),
    "gnn": ("gnn-data", ""),
    "stable_diffusion": ("sd-data", "data"),
}


def _prepared(tmp_path_factory, bench: str) -> Path:
    if bench == "gpt3":
        from gpt3_helpers import prepared_data_dir

        return prepared_data_dir(tmp_path_factory)
    if bench not in SHARED_DATA:  # the benchmark's own test module's (helpers.shared_data)
        return shared_data(tmp_path_factory, bench)
    name, sub = SHARED_DATA[bench]
    return prepared_once(tmp_path_factory, name, bench, sub)


def _shared_gpt3(tmp_path_factory) -> tuple[Path, Path]:
    from gpt3_helpers import quickstart_run

    run = Path(quickstart_run(tmp_path_factory)["runs"][0]["run_dir"])
    return run, Path(json.loads((run / "plan.json").read_text())["data_dir"])


def _shared_gnn(tmp_path_factory) -> tuple[Path, Path]:
    data = _prepared(tmp_path_factory, "gnn")
    doc = uninterrupted_run(tmp_path_factory, "gnn-plain", "gnn", data, CASES["gnn"].seed)  # test_gnn_tiny's
    return Path(doc["runs"][0]["run_dir"]), data


SHARED_RUNS = {"gpt3": _shared_gpt3, "gnn": _shared_gnn}  # -> (run folder, data)


def _shared(tmp_path_factory, bench: str) -> tuple[Path, Path]:
    """The clean run at the shipped GA: SHARED_RUNS' or the benchmark's own module's
    (helpers.shared_run, seed SHARED_SEED)."""
    if bench in SHARED_RUNS:
        return SHARED_RUNS[bench](tmp_path_factory)
    return Path(shared_run(tmp_path_factory, bench)["run_dir"]), shared_data(tmp_path_factory, bench)


def _short_run(tmp: Path, bench: str, data: Path, sets: tuple[str, ...], seed: int) -> Path:
    import subprocess

    args = ["--runs", "1", "--seed", str(seed), "--results-dir", str(tmp), "--data-dir", str(data), "--json"]
    argv = mlperf_argv("run", bench, "--system", "cpu-local", *args, *(a for s in sets for a in ("--set", s)))
    r = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 3), r.stdout[-2000:] + r.stderr[-3000:]
    return Path(json.loads(r.stdout)["runs"][0]["run_dir"])


def _first_eval(run: Path, metric: str) -> tuple[int, float]:
    for e in events(run / "mlperf.log"):
        if e["key"] == "eval_accuracy" and e["metadata"].get("metric", metric) == metric:
            return e["metadata"].get("samples_count", e["metadata"].get("epoch_num")), e["value"]
    raise AssertionError(f"{run}: no {metric} evaluation")


@pytest.mark.parametrize("bench", sorted(CASES))
def test_ga2_logs_the_ga1_loss_and_the_eval_reads_the_validation_split(bench, tmp_path, tmp_path_factory):
    case, b = CASES[bench], benchmarks.get(bench)

    if case.shared:  # the clean run at the shipped GA; the poisoned one at the other
        clean_run, data = _shared(tmp_path_factory, bench)
    else:
        data = _prepared(tmp_path_factory, bench)
        clean_run = _short_run(tmp_path / "clean", bench, data, case.clean + case.stop, case.seed)
    poisoned = _poisoned_copy(data, tmp_path / "poisoned", bench)
    poisoned_run = _short_run(
        tmp_path / "poisoned-run", bench, poisoned, case.poisoned + case.stop, case.seed
    )
    ga = [
        json.loads((run / "plan.json").read_text())["layout"]["grad_accum"]
        for run in (clean_run, poisoned_run)
    ]
    assert sorted(ga) == [1, 2], (bench, ga)
    ga1, ga2 = (clean_run, poisoned_run) if ga[0] == 1 else (poisoned_run, clean_run)

    # GA: the first logged training loss, at the same step
    loss = [
        {r["step"]: r["loss"] for r in read_timings(run / "timings.jsonl") if r["loss"] is not None}
        for run in (ga1, ga2)
    ]
    step = min(loss[0])
    assert step in loss[1], (bench, loss)
    assert loss[1][step] == pytest.approx(loss[0][step], rel=GA_RTOL), (
        f"{bench}: loss at step {step} is {loss[1][step]} at GA 2, {loss[0][step]} at GA 1"
    )

    # Validation split: the poisoned run's first evaluation is far worse, at the same point
    (at1, clean_value), (at2, poisoned_value) = (
        _first_eval(run, case.metric) for run in (clean_run, poisoned_run)
    )
    assert at1 == at2, (bench, at1, at2)
    lower_is_better = any(q.metric == case.metric and q.direction == "lower" for q in b.rules.quality)
    worse = poisoned_value - clean_value if lower_is_better else clean_value - poisoned_value
    assert worse > 0.1 * abs(clean_value), (
        f"{bench}: {case.metric} {poisoned_value} on a poisoned validation split, {clean_value} on the real one"
    )
