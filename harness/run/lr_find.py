"""`mlperf lr-find BENCH --system NAME`: the LR range test (Smith 2017), orchestrated torch-free.

    res = lr_find.run("gpt3", "cpu-local")       # resolve, prepare, launch the sweep, analyse
    res.suggested_lr, res.png

The benchmark's `impl.lr_find` (`supported()`: gpt3's and llama31_8b's in megatron_gpt, llama2's
LoRA) runs the exponential LR sweep of harness/train/lr_sweep.py with its own training step (its
default length, 100-300 steps, from the run's starting checkpoint, the run's own data order and
layout) and reports the loss
of every step; here the loss is smoothed (bias-corrected exponential moving average), the sweep is
cut where it diverges, and the suggested peak LR is half the LR at the minimum of the smoothed loss
(the steepest-descent LR is reported too). Why half, not fastai's tenth: the peak of a
warmup + cosine schedule belongs just below the point where the loss stops falling (Smith 2017),
with a margin for the noise of a short sweep; a tenth is the one-cycle-from-scratch rule, and here,
continuing from the benchmark's checkpoint, it is too low. Measured on tiny gpt3 (cpu-local, 2 cores,
the earlier 150-step checkpoint):
the minimum of three sweeps (seeds 0, 1, 2) sat at 2.19e-3, 1.55e-3, 2.76e-3; training with
LR 2.19e-4 (a tenth) did not reach the then target within the sample cap (log-ppl 1.198 > 1.18), 7.3e-4
reached it in 0.58 min, 1.1e-3 (half: the suggestion) in 0.28 min, 2.2e-3 in 0.22 min.
Artifacts go to
`<results-dir>/lr-find/<bench>/<system>/<stamp>/` (plan, raw sweep, lr_find.json, lr_find.png,
stdout.log): never into the submission tree `<results-dir>/<org>/`.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import benchmarks
from benchmarks.benchmark import Benchmark
from harness.core.errors import ConfigError, HarnessError
from harness.core.runfolder import LR_FIND_RAW, LR_FIND_REQUEST

BETA = 0.9
SUGGEST_DIVISOR = 2.0


@dataclass
class LrFindResult:
    benchmark: str
    system: str
    out_dir: str
    steps_run: int
    lrs: list[float]
    losses: list[float | None]
    smoothed: list[float | None]
    lr_at_min: float | None
    steepest_lr: float | None
    suggested_lr: float | None
    configured_lr: float | None
    png: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


MAX_STEPS = 100_000  # a sweep is a few hundred steps; more is a typo (it would run for days)


def supported() -> list[str]:
    """The registered benchmarks that have an LR range test (`impl.lr_find`)."""
    return [b.name for b in benchmarks.registered() if b.impl is not None and b.impl.lr_find is not None]


def refuse_unsupported(bench: Benchmark) -> None:
    if bench.impl is None or bench.impl.lr_find is None:
        raise ConfigError(
            f"{bench.name} has no LR range test; `mlperf lr-find` runs {', '.join(supported())}"
        )


def smooth(losses: list[float | None], beta: float = BETA) -> list[float | None]:
    """Bias-corrected EMA; None (non-finite) stays None and stops the average."""
    out: list[float | None] = []
    avg, n = 0.0, 0
    for x in losses:
        if x is None or not math.isfinite(x):
            out.append(None)
            continue
        n += 1
        avg = beta * avg + (1 - beta) * x
        out.append(avg / (1 - beta**n))
    return out


def analyse(lrs: list[float], losses: list[float | None], skip: int = 5) -> tuple[float | None, ...]:
    """(lr at the smoothed minimum, steepest-descent lr, suggested lr = minimum / 2)."""
    sm = smooth(losses)
    pts = [(lr, s) for lr, s in zip(lrs, sm) if s is not None][skip:]
    if len(pts) < 3:
        return None, None, None
    i_min = min(range(len(pts)), key=lambda i: pts[i][1])
    lr_min = pts[i_min][0]
    steep = None
    w = max(2, len(pts) // 10)  # slope over a tenth of the sweep: one noisy step is not a slope
    if i_min > 2 * w:
        grads = [
            ((pts[i + w][1] - pts[i - w][1]) / (math.log(pts[i + w][0]) - math.log(pts[i - w][0])), pts[i][0])
            for i in range(w, i_min - w)
        ]
        steep = min(grads)[1]
    return lr_min, steep, lr_min / SUGGEST_DIVISOR


def plot(res: LrFindResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    raw = [(lr, x) for lr, x in zip(res.lrs, res.losses) if x is not None]
    sm = [(lr, x) for lr, x in zip(res.lrs, res.smoothed) if x is not None]
    if raw:
        ax.plot(*zip(*raw), color="0.75", lw=0.8, label="loss")
    if sm:
        ax.plot(*zip(*sm), color="C0", lw=1.8, label=f"smoothed (EMA {BETA})")
    if res.suggested_lr:
        ax.axvline(res.suggested_lr, color="C2", ls="--", label=f"suggested {res.suggested_lr:.3g}")
    if res.lr_at_min:
        ax.axvline(res.lr_at_min, color="C3", ls=":", label=f"minimum {res.lr_at_min:.3g}")
    if res.configured_lr:
        ax.axvline(
            res.configured_lr, color="0.4", ls="-.", lw=0.8, label=f"configured {res.configured_lr:.3g}"
        )
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    if sm:
        lo = min(x for _, x in sm)
        hi = max(x for _, x in sm[: max(3, len(sm) // 2)])
        ax.set_ylim(lo - 0.1 * (hi - lo + 1e-9), hi + 0.5 * (hi - lo + 1e-9))
    ax.set_title(f"LR range test: {res.benchmark} on {res.system}")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


class _Monitor:
    def __init__(self):
        self.rc: int | None = None

    def poll(self, plan) -> None:
        pass

    def status(self, plan, text: str) -> None:
        pass

    def finished(self, plan, returncode: int) -> None:
        self.rc = returncode


def run(
    bench: Benchmark,
    system: str,
    steps: int | None = None,
    min_lr: float = 1e-5,
    max_lr: float = 1.0,
    out_dir: str | Path | None = None,
    make_plot: bool = True,
    results_dir: str | Path = "results",
    seed: int = 0,
    **resolve_kw,
) -> LrFindResult:
    """The sweep of one plan resolved as `mlperf run` resolves it (`resolve_kw`: size, sets,
    nproc_per_node, data_dir, launcher)."""
    from harness.resolve.runplans import runnable
    from harness.run import execute, launch

    refuse_unsupported(bench)  # first: the one line names the benchmarks that have it
    # steps None: the benchmark's own sweep length (its lr_find's STEPS), reported back in the raw file
    if steps is not None and not 10 <= steps <= MAX_STEPS:
        raise ConfigError(
            f"--steps {steps}: an LR range test takes 10 to {MAX_STEPS:,} steps (a few hundred is usual)"
        )
    # NaN fails every comparison and inf passes `min < max`: both refused by name
    if not (math.isfinite(min_lr) and math.isfinite(max_lr) and 0 < min_lr < max_lr):
        raise ConfigError(f"--min-lr {min_lr} / --max-lr {max_lr}: need finite 0 < min < max")
    impl = runnable(bench)
    r = execute.resolve(bench, system, runs=1, seed=seed, results_dir=results_dir, **resolve_kw)
    plan = r.plans[0]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (
        Path(out_dir).resolve()
        if out_dir
        else Path(results_dir).resolve() / "lr-find" / bench.name / r.system.name / f"{stamp}-{os.getpid()}"
    )
    plan = plan.model_copy(
        update={"run_dir": str(out), "log_path": str(out / "lr_find.mllog"), "task": "lr_find"}
    )
    r.plans = [plan]
    execute.write_plans([plan])
    (out / LR_FIND_REQUEST).write_text(json.dumps({"steps": steps, "min_lr": min_lr, "max_lr": max_lr}))
    execute.prepare(bench, [plan], r.system)
    mon = _Monitor()
    launch.get(r.launcher).run([plan], r.system, impl.module, mon)
    raw_path = out / LR_FIND_RAW
    if mon.rc != 0 or not raw_path.exists():
        raise HarnessError(f"the LR sweep failed (exit {mon.rc}); see {out / 'stdout.log'}")
    raw = json.loads(raw_path.read_text())
    lrs, losses = raw["lrs"], raw["losses"]
    lr_min, steep, suggested = analyse(lrs, losses)
    res = LrFindResult(
        benchmark=bench.name,
        system=r.system.name,
        out_dir=str(out),
        steps_run=len(lrs),
        lrs=lrs,
        losses=losses,
        smoothed=smooth(losses),
        lr_at_min=lr_min,
        steepest_lr=steep,
        suggested_lr=suggested,
        configured_lr=raw.get("configured_lr"),
    )
    steps = raw.get("steps", steps)
    if steps is not None and len(lrs) < steps:
        res.notes.append(f"stopped after {len(lrs)} of {steps} steps: the loss diverged at lr {lrs[-1]:.3g}")
    elif lr_min is not None and lr_min >= lrs[-1] * 0.9:
        res.notes.append("the loss was still falling at --max-lr: rerun with a larger --max-lr")
    if suggested is None:
        res.notes.append("too few finite losses for a suggestion: lower --min-lr or raise --steps")
    if make_plot:
        res.png = str(plot(res, out / "lr_find.png"))
    (out / "lr_find.json").write_text(json.dumps(res.to_dict(), indent=2))
    return res
