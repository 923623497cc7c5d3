"""GPU acceptance check: on one GPU, in at most 6 minutes, everything a CPU cannot prove.

    python bench/gpu_check.py --out DIR [--budget-s 360] [--system dgx-h200x1] [--only PARTS]

Measures, in this order (each row of DIR/gpu_check.json names the implementation that produced it):
1. GPT-3 175B-shaped decoder layer (hidden 12288, seq 2048, micro-batch 1, TP=1), forward + backward:
   megatron-core with the benchmark's own config and layer spec, bf16, and FP8 through Transformer
   Engine when TE imports; the same shapes in plain PyTorch in bf16 and with FP8 linears through
   `torch._scaled_mm` (the FP8 figure where TE is missing). Step time, TFLOP/s, MFU against the
   datasheet peak (bench/gpu/flops.py), tokens/s, peak memory.
2. One Llama 2 70B-width LoRA decoder layer (seq 8192): bf16; FP8 through torchao (the benchmark's
   fp8 switch) and through `torch._scaled_mm`; bf16 and torchao FP8 again with the layer compiled
   (the compile switch: eager torchao FP8 measured 1.9x slower than bf16 on the H200). Not yet run.
3. One SD v2 UNet training step and one R-GAT training step at full size with the 1-GPU system's
   tuned config (bench/gpu/steps.py says what is real and what is synthetic). The SD step runs at
   the largest halving of the config's micro-batch that fits the card (dgx-h200x1's 64 would need
   ~180 GiB: 32 on an H200); its row says so (`micro_batch`, `config_micro_batch`, why).
4. In parallel processes, the longest first: `pytest -m gpu tests/gpu`, and every benchmark's tiny
   size through `mlperf run BENCH --system SYS --nproc-per-node 1 --size tiny --runs 1` (log through
   `mlperf check`), then once more per GPU-only switch of its config (`gpu_only`) with `--set
   SWITCH=<on>`. Each benchmark's data is prepared by its first run (bench/gpu/runs.py). A switch
   whose library is missing here (Transformer Engine on the check machine) is `refused` at once,
   as `mlperf run` refuses it (exit 2, one line, before launch), and is listed as not checked.
Writes DIR/gpu_check.json (bench/gpu/report.py: the schema) after every check, so a run cut short
still brings back what had finished, and prints one line per check.
Exit: 0 all checks ok (refused/skipped ones are listed as not checked), 4 a check failed, 2 no CUDA
GPU (one line) or bad arguments, 1 the script itself broke.

Measured on one H200 with 16 host cores (2026-12-04, 3 runs; docs/gpu/gpu_check_h200_2026-12-04.json):
layers 16 s, steps 20 s, then the tests and tiny runs side by side (the longest run, SD
`cuda_graphs`, 71 s after its data preparation); in all 177-218 s. The plan written before any GPU:
| stage | s | basis |
| start: imports, CUDA context | 10 | torch + megatron-core import ~5 s, context ~2 s |
| 1. GPT-3 layer: 3 rows (TE rows skipped) | 15 | 1.8 G-param layer, 22 TFLOP/step fwd+bwd -> ~50 ms at ~450 TFLOP/s; 13 steps + build ~5 s a row |
| 2. Llama 2 LoRA layer: 3 rows | 20 | ~0.7 G-param layer at seq 8192 ~40 ms/step; building the base (262 M embedding) ~5 s; torchao swap ~5 s |
| 3. SD UNet step at MBS 32 + R-GAT step | 45 | UNet 866 M build ~8 s, ~75 TFLOP/step -> ~0.3 s, 14 steps + flop count ~8 s, cuDNN autotune; random 1 M-paper graph + CSC in numpy ~15 s |
| 4. tests + tiny runs, 6 processes at a time | 200 | 14 runs + the gpu tests (4 base + 10 switch runs; 5 switches refused at once: gpt3 fp8 and cuda_graphs for TE, tp_comm_overlap and both CPs for the one-GPU layout): the SD `cuda_graphs` lane ~210 s (prepare ~30 + start 15 + compile ~90 + train/eval ~75) bounds it; the other 14 jobs, ~700 s of work (Job.expected_s; gpu tests ~60 s), fill 5 lanes in ~140 s |
| total | ~290 | under the 360 s budget; at the budget the runs still going are stopped (as `mlperf run` stops them) and reported failed |

Where: any CUDA host after the GPU install line of docs/install-gpu.md, or a host without network
whose image lacks this project's pure-Python dependencies (megatron-core, mlperf-logging, diffusers,
pydantic, torchao): download these wheels elsewhere (15.3 MiB; bench/gpu_rehearse.sh downloads the
same list, its TRAVEL, and prints the size), copy them over, install them beside the host's torch,
never reinstalling it. Transformer Engine has no wheel that installs this way, so its rows say
`skipped` and FP8 GPT-3 is measured through `_scaled_mm`:

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
      megatron-core==0.19.2 mlperf-logging==4.1.68 diffusers==0.42.1 importlib-metadata==8.7.0 \
      pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
      typing-extensions==4.16.0 peft==0.21.2 torchao==0.17.0
    # on the GPU host (docs/gpu-acceptance.md; bench/gpu_rehearse.sh rehearses it on a CPU):
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site && python3 bench/gpu_check.py --out DIR

A run cut short keeps what finished (the JSON is written after every check): rerun only what
failed with `--only` those parts and a smaller `--budget-s`, not everything.

The CPU smoke test (tests/unit/test_gpu_check.py) runs `--device cpu --smoke`: toy sizes, every
command built and one dry run; its figures are not GPU figures (the JSON says `smoke: true`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness.core.errors import CHECK_FAILED, INTERRUPTED, OK, USAGE  # noqa: E402

PARTS = ("layers", "steps", "tests", "runs", "switches")  # in the order they run


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage too)
        self.exit(USAGE, f"error: {message} (see --help)\n")


def parse(argv):
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for gpu_check.json")
    ap.add_argument("--budget-s", type=float, default=360.0, help="stop starting new checks after this")
    ap.add_argument("--system", help="1-GPU system for the runs (default: by GPU name, else dgx-h100x1)")
    ap.add_argument("--parallel", type=int, default=6, help="processes at a time for the tests and tiny runs")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma list of: {', '.join(PARTS)}")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # CI: toy sizes on the CPU
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    if not parts <= set(PARTS):
        ap.error(f"--only {args.only}: choose from {', '.join(PARTS)}")
    if args.out.exists() and not args.out.is_dir():
        ap.error(f"--out {args.out}: not a folder")
    if args.parallel < 1:
        ap.error(f"--parallel {args.parallel}: need at least 1")
    if args.device == "cpu" and not args.smoke:
        ap.error("--device cpu is only for --smoke (the CI test); the figures are measured on a GPU")
    args.only = parts
    return args


def device_facts(device: str) -> dict:
    import importlib.util

    import torch

    facts = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        facts.update(
            name=p.name,
            capability=f"{p.major}.{p.minor}",
            multiprocessors=p.multi_processor_count,
            memory_gib=round(p.total_memory / 2**30, 1),
        )
    else:
        facts["name"] = "cpu (smoke test)"
    # Installed or not (each check imports what it uses and says so when the import fails).
    for lib in ("megatron", "transformer_engine", "torchao", "diffusers", "mlperf_logging", "peft"):
        facts[f"has_{lib}"] = importlib.util.find_spec(lib) is not None
    return facts


def _line(c) -> str:
    f = c.figures
    fig = f"{f['step_s'] * 1e3:9.2f} ms {f['tflops']:7.1f} TFLOP/s" if "step_s" in f else " " * 29
    mfu = f" MFU {f['mfu']:.1%}" if f.get("mfu") is not None else ""
    return f"{c.status:8s} {c.name:40s}{fig}{mfu}  {c.detail}"[:220]


def main(argv=None) -> int:
    args = parse(argv)
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed; see docs/install-gpu.md", file=sys.stderr)
        return USAGE
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "error: no CUDA GPU visible (torch.cuda.is_available() is False); run this on a GPU host",
            file=sys.stderr,
        )
        return USAGE

    from bench.gpu import flops, layers, runs, steps
    from bench.gpu.report import Context, summarize
    from harness.core.files import atomic_write

    name = torch.cuda.get_device_name(0) if args.device == "cuda" else ""
    system = args.system or flops.system_for_gpu(name) or "dgx-h100x1"
    ctx = Context(device=args.device, smoke=args.smoke, budget_s=args.budget_s, peaks=flops.peak_tflops(name))
    if args.smoke:  # toy sizes (the CI test also sets OMP_NUM_THREADS=1: fastest at this size)
        ctx.warmup, ctx.iters = 1, 2
    device = device_facts(args.device)
    print(
        f"# {device['name']}, torch {device['torch']}, system {system}, budget {args.budget_s:.0f} s",
        flush=True,
    )
    checks, out, lock = [], args.out / "gpu_check.json", threading.Lock()

    def record(c) -> None:
        """Print a finished check and rewrite the JSON with it: a script cut short (the device
        call's timeout) still brings back every check that had finished."""
        with lock:
            checks.append(c)
            print(_line(c), flush=True)
            atomic_write(out, summarize(ctx, checks, device).dump())

    with tempfile.TemporaryDirectory(prefix="gpu_check.") as tmp:
        work = (args.work or Path(tmp)).resolve()
        if "layers" in args.only:
            for c in layers.checks(ctx):
                record(c)
        if "steps" in args.only:
            for c in steps.checks(ctx, system):
                record(c)
        if args.only & {"tests", "runs", "switches"}:
            runs.checks(ctx, system, work, args.parallel, args.only, record)
    report = summarize(ctx, checks, device)
    atomic_write(out, report.dump())
    print(f"{len(report.failed)} failed, {len(report.not_checked)} not checked; {out}")
    return CHECK_FAILED if report.failed else OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
