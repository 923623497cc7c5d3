"""`python -m reference_impls.megatron_gpt.prepare --plan PLAN.json`: make plan.data_dir ready (untimed).

Tiny: write the synthetic Markov corpus (data.py); where the benchmark starts from a checkpoint
(gpt3, deepseekv3_671b; not llama31_8b or gpt_oss_20b, pretrained from scratch), pretrain it the
way the reference's checkpoint was made, from a fixed seed (gpt3: reference_checkpoint_step steps
at reference_global_batch_size, same optimizer and schedule, Adam's state kept; deepseekv3_671b:
tiny_start_steps at the run's GBS, weights only, as its start is DeepSeek-V3's weights after 50
router-adapting steps), save it loadable with `torch.load(weights_only=True)`, and write
PREPARED.json last. Deterministic: same config, same
bytes (single process, one thread).
Full: check the C4 + checkpoint layout and raise ConfigError naming the first missing file and
where it comes from (nothing is downloaded); then PREPARED.json with their sizes.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from harness.core.data_manifest import MANIFEST
from harness.core.errors import ConfigError
from harness.core.layout import DEGREES, derive
from harness.core.runplan import RunPlan
from harness.train.runtime import init_one_process_group
from reference_impls.megatron_gpt import bench, datafiles
from reference_impls.megatron_gpt.data import TRAIN_SEQUENCES

PRETRAIN_SEED = 4000  # data order and init of the checkpoint run
# Peak LR of the checkpoint's pretraining (the reference checkpoint too was trained with its own
# recipe, not the submitter's tuned LR); warmup/decay are the config's reference_* numbers, so the
# run continues the same schedule shape at init_checkpoint_step. Calibrated: see reference_impls/gpt3/README.md.
PRETRAIN_LR = 1.0e-2
# deepseekv3_671b's tiny start: the tiny config's own peak LR (its schedule: warmup 4, cosine over
# max_steps), so the pretraining is the first tiny_start_steps of a run from scratch.
WEIGHTS_PRETRAIN_LR = 3.0e-3


def check_full(data_dir: Path, name: str, full: datafiles.FullData) -> list[Path]:
    """The full-size files, every one present; else ConfigError, one line naming every missing file
    (relative to data_dir) grouped by where it comes from."""
    files = datafiles.full_files(data_dir, full)
    missing: dict[str, list[str]] = {}
    for p, source in files:
        if not p.is_file():
            missing.setdefault(source, []).append(str(p.relative_to(data_dir)))
    if missing:
        said = "; ".join(f"{', '.join(paths)} (from {source})" for source, paths in missing.items())
        raise ConfigError(f"{name} full-size data in {data_dir} is missing {said}")
    return [p for p, _ in files]


def pretrain_config(plan: RunPlan):
    """gpt3: the run's config at the reference GBS, so warmup/decay are the reference's own
    numbers; weights-only starts: the run's GBS at WEIGHTS_PRETRAIN_LR. In one process (no model
    parallelism; one microbatch per step)."""
    values = dict(plan.config)
    for k in ("opt_learning_rate_warmup_steps", "opt_learning_rate_decay_steps", "init_checkpoint_step"):
        values.pop(k, None)
    values.pop("opt_end_learning_rate", None)
    weights_only = bench.of(plan).config.START_WEIGHTS_ONLY
    gbs = values["global_batch_size" if weights_only else "reference_global_batch_size"]
    values.update(
        global_batch_size=gbs,
        micro_batch_size=gbs,
        opt_base_learning_rate=WEIGHTS_PRETRAIN_LR if weights_only else PRETRAIN_LR,
        train_samples_cap=TRAIN_SEQUENCES,
        # every layout degree this config has (a dense model has no expert_model_parallel_size)
        **{f: 1 for f in DEGREES.values() if f in bench.of(plan).config.model_fields},
        # One checkpoint serves every layout (PREPARED.json does not depend on them), so it is
        # always pretrained in one process with the plain optimizer in fp32, whatever the run's
        # switches (precision is not part of the data's fingerprint either).
        precision="fp32",
        distributed_optimizer=False,
        sequence_parallel=False,
        overlap_param_gather=False,
    )
    return bench.of(plan).config.model_validate(values)


def prepare_tiny(plan: RunPlan, log=print) -> Path:
    import torch
    import torch.distributed as dist

    from reference_impls.megatron_gpt import data, train
    from reference_impls.megatron_gpt import model as gmodel

    data_dir = Path(plan.data_dir)
    from_checkpoint = bench.of(plan).config.FROM_CHECKPOINT
    cfg = pretrain_config(plan) if from_checkpoint else bench.of(plan).config.model_validate(plan.config)
    t0 = time.perf_counter()
    facts = data.generate_tiny(data_dir, cfg)
    log(
        f"{plan.benchmark} tiny: corpus written to {data_dir} ({time.perf_counter() - t0:.1f} s; "
        f"entropy rate {facts['entropy_rate_nats']:.4f} nats/token)"
    )
    files = [p + ext for p in (*data.TRAIN_PREFIXES, data.VALID_PREFIX) for ext in (".bin", ".idx")]
    if not from_checkpoint:  # pretraining from scratch: the corpus is all there is
        return bench.manifest(plan).write(plan, files, facts)

    torch.set_num_threads(max(1, plan.threads_per_process))
    own_group = not dist.is_initialized()
    if own_group:
        init_one_process_group("gloo")
    gbs = cfg.global_batch_size
    layout = derive(cfg, nodes=1, procs_per_node=1)
    t0 = time.perf_counter()
    try:
        train.init_parallel(layout, PRETRAIN_SEED)
        model, optimizer, scheduler, tcfg = gmodel.build(cfg, layout, "cpu")
        with tempfile.TemporaryDirectory() as cache:  # megatron's index cache, not in data_dir
            trainset, valid = data.build_datasets(data_dir, cfg, "tiny", PRETRAIN_SEED, Path(cache))
        stepper = train.Stepper(model, optimizer, scheduler, tcfg, cfg, layout, "cpu")
        steps = cfg.start_pretrain_steps()
        for step in range(steps):
            stepper.train_step(train.train_microbatches(trainset, step, layout))
        val = stepper.evaluate(train.eval_microbatches(valid, 0, 1, gbs))
        ckpt = data_dir / datafiles.CHECKPOINT
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        adam = not cfg.START_WEIGHTS_ONLY  # a weights-only start leaves Adam's state behind
        torch.save(gmodel.tiny_state(model, optimizer if adam else None, steps, steps * gbs), ckpt)
    finally:
        train._teardown()
        if own_group:
            dist.destroy_process_group()
    log(
        f"{plan.benchmark} tiny: checkpoint after {steps} steps x GBS {gbs} ({time.perf_counter() - t0:.1f} s), "
        f"validation log-perplexity {val:.4f}"
    )
    facts.update(
        checkpoint_step=steps,
        checkpoint_global_batch_size=gbs,
        checkpoint_val_log_ppl=val,
        pretrain_seed=PRETRAIN_SEED,
    )
    return bench.manifest(plan).write(plan, files + [datafiles.CHECKPOINT], facts)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def prepare(plan: RunPlan, log=_stderr) -> Path:
    """The task "prepare" (harness/train/entry.py); returns PREPARED.json's path."""
    manifest = bench.manifest(plan)
    if manifest.is_prepared(plan):
        log(f"{plan.benchmark} {plan.size}: {plan.data_dir} is already prepared")
        return Path(plan.data_dir) / MANIFEST
    if plan.size == "full":
        full = datafiles.full_data(bench.of(plan).config)
        return manifest.write(plan, check_full(Path(plan.data_dir), plan.benchmark, full))
    return prepare_tiny(plan, log)
