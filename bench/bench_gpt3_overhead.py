"""Per-step overhead of the harness's GPT-3 training loop against a bare megatron-core loop.

    python bench/bench_gpt3_overhead.py [--steps 50] [--rounds 6] [--data-dir DIR]

Same process, same tiny model (benchmarks/gpt3/configs/tiny.yaml), same optimizer and data:
  harness  reference_impls.megatron_gpt.train: train_microbatches (GPTDataset) + Stepper.train_step +
           the per-step timings row + stop-flag check + block_start/stop MLPerf log lines
  bare     megatron-core as its own examples train: a DataLoader over the same GPTDataset,
           zero_grad_buffer / forward_backward_func / optimizer.step / scheduler.step
Rounds alternate (bare, harness, bare, ...) so machine load drifts hit both; the ratio is of the
median step times over all rounds (evaluation is excluded: it is the same code in both).
Goal: ratio <= 1.02. Also times the per-step bookkeeping alone (timings row), as a fraction of a
bare step: the part of the overhead that machine load cannot hide. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

import benchmarks

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")


def _typed(plan):
    return benchmarks.get(plan.benchmark).typed(plan.config)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=48, help="steps per round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--data-dir", default=None, help="a prepared tiny gpt3 data dir (default: prepare one in /tmp)"
    )
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    from benchmarks.gpt3 import DATA as manifest
    from harness.run.execute import make_plans
    from reference_impls.megatron_gpt import data, datafiles, prepare, train
    from reference_impls.megatron_gpt import model as gmodel

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench-gpt3-"))
    data_dir = Path(args.data_dir) if args.data_dir else tmp / "data"
    plan = make_plans(
        benchmarks.get("gpt3"),
        "cpu-local",
        size="tiny",
        runs=1,
        seed=1,
        results_dir=tmp / "results",
        data_dir=data_dir,
    )[0]
    if not manifest.is_prepared(plan):
        prepare.prepare(plan, log=lambda m: print(m, file=sys.stderr))
    from harness.core.mllog import MLLog
    from harness.train.runtime import init_one_process_group

    init_one_process_group("gloo")
    cfg, layout = _typed(plan), plan.layout
    train.init_parallel(layout, plan.seed)
    model, optimizer, scheduler, tcfg = gmodel.build(cfg, layout, "cpu")
    gmodel.load_tiny_state(model, optimizer, torch.load(data_dir / datafiles.CHECKPOINT, weights_only=True))
    gmodel.set_schedule_step(scheduler, cfg.init_checkpoint_step)
    trainset, _ = data.build_datasets(data_dir, cfg, "tiny", plan.seed, cache_dir=tmp / "cache")
    stepper = train.Stepper(model, optimizer, scheduler, tcfg, cfg, layout, "cpu")
    log = MLLog(str(tmp / "mlperf.log"))
    # Timings takes the rank's runtime; this bench has none, only what Timings reads of one
    rank0 = types.SimpleNamespace(
        plan=types.SimpleNamespace(run_dir=str(tmp), resume_from=None), is_rank0=True
    )
    timings = train.Timings(rank0)

    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    fb = get_forward_backward_func()
    gbs, seq, every = cfg.global_batch_size, cfg.max_sequence_length, cfg.eval_interval_steps
    loader = iter(torch.utils.data.DataLoader(trainset, batch_size=layout.micro_batch_size, shuffle=False))

    def bare_forward(data_iterator, m):
        b = next(data_iterator)
        out = m(b["tokens"], b["position_ids"], None, labels=b["labels"])
        mask = b["loss_mask"]

        def loss_func(o):
            loss = (o.float() * mask).sum() / mask.sum()
            return loss, {"lm loss": loss.detach().clone()}

        return out, loss_func

    def bare(n: int) -> list[float]:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            mbs = [next(loader) for _ in range(layout.grad_accum)]
            model[0].zero_grad_buffer()
            optimizer.zero_grad()
            fb(
                forward_step_func=bare_forward,
                data_iterator=iter(mbs),
                model=model[0],
                num_microbatches=layout.grad_accum,
                seq_length=seq,
                micro_batch_size=layout.micro_batch_size,
                forward_only=False,
            )
            optimizer.step()
            scheduler.step(increment=1)
            times.append(time.perf_counter() - t0)
        return times

    state = {"step": 0}
    stop_requested = False

    def harness(n: int) -> list[float]:
        times = []
        for _ in range(n):
            step = state["step"]
            if step % every == 0:
                log.start(
                    "block_start",
                    metadata={"first_epoch_num": step * gbs * seq, "epoch_count": every * gbs * seq},
                )
            t0 = time.perf_counter()
            mbs = train.train_microbatches(trainset, step, layout)
            t1 = time.perf_counter()
            stepper.train_step(mbs)
            state["step"] = step = step + 1
            dt = time.perf_counter() - t0
            timings.row(step, dt, t1 - t0, gbs)
            if stop_requested:
                break
            if step % every == 0:
                log.end(
                    "block_stop",
                    metadata={
                        "first_epoch_num": (step - every) * gbs * seq,
                        "epoch_count": every * gbs * seq,
                    },
                )
                timings.flush()
            times.append(time.perf_counter() - t0)
        return times

    bare(5), harness(5)  # warm-up (allocator, first-call paths)
    b_all, h_all = [], []
    for _ in range(args.rounds):
        b_all += bare(args.steps)
        h_all += harness(args.steps)
    # The bookkeeping alone (timings row + its buffered write), which load noise cannot hide.
    t0 = time.perf_counter()
    for i in range(10_000):
        timings.row(i, 0.02, 0.001, gbs)
    bookkeeping_us = (time.perf_counter() - t0) / 10_000 * 1e6
    timings.close()
    log.close()
    b_med, h_med = statistics.median(b_all), statistics.median(h_all)
    b_mean, h_mean = statistics.fmean(b_all), statistics.fmean(h_all)
    out = {
        "bench": "gpt3_overhead",
        "steps_each": len(b_all),
        "bare_median_ms": round(1e3 * b_med, 3),
        "harness_median_ms": round(1e3 * h_med, 3),
        "ratio_median": round(h_med / b_med, 4),
        "ratio_mean": round(h_mean / b_mean, 4),
        "bookkeeping_us_per_step": round(bookkeeping_us, 2),
        "bookkeeping_fraction": round(bookkeeping_us / (1e6 * b_med), 5),
        "goal": 1.02,
        "threads": args.threads,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    train._teardown()
    dist.destroy_process_group()
    print(
        f"harness per-step overhead vs bare megatron-core: x{out['ratio_median']:.4f} (median), "
        f"x{out['ratio_mean']:.4f} (mean); {out['bare_median_ms']} ms vs {out['harness_median_ms']} ms",
        file=sys.stderr,
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
