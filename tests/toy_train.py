"""A toy reference implementation for harness tests: `python -m tests.toy_train --plan plan.json`.

It follows the contract of NOTES.md with a real (tiny) torch model so that the harness's signal,
checkpoint/resume, log and diagnose paths can be tested without a benchmark's cost. Knobs, from
the environment (set by the tests):
    TOY_STEPS=N            steps to train (default 60); success at the end
    TOY_STEP_S=s           sleep per step (default 0.02)
    TOY_DATA_WAIT_S=s      extra sleep inside the data fetch (a throttled loader)
    TOY_STALL_EVERY=k      every k-th step stalls for TOY_STALL_S seconds (network congestion)
    TOY_LR=x               learning rate (default 0.05; 5.0 diverges)
    TOY_CKPT_EVERY=k       checkpoint every k steps (0: never), at block boundaries
    TOY_READY_FILE=path    touched after run_start (the test then sends its signal)
    TOY_MEM_CAP_MB=m       cap the address space at (current + m) MiB (a small accelerator) ...
    TOY_BATCH_MB=b         ... and allocate b MiB of activations per step (a batch too big for it)
    TOY_NO_POWER_EXTENSION=1   end at run_stop even in power mode (a loop without the extension)
    TOY_PENDING_COLLECTIVES=n  return with n async all-reduces in flight, the group held as DDP's
                           reducer holds it (the gloo teardown race harness.train.entry.run avoids)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import benchmarks
from benchmarks.benchmark import Benchmark
from harness.core.benchmark import Implementation, RunOutcome, lazy
from harness.core.data_manifest import DataManifest


def _env(name, default, cast=float):
    return cast(os.environ.get(name, default))


def run(rt) -> RunOutcome:
    import torch

    from harness.train.run_checkpoint import RunCheckpointer
    from harness.train.timings import Timings

    plan, log = rt.plan, rt.log
    (Path(plan.run_dir) / "toy.pid").write_text(str(os.getpid()))
    steps, step_s = _env("TOY_STEPS", 60, int), _env("TOY_STEP_S", 0.02)
    wait_s, stall_every = _env("TOY_DATA_WAIT_S", 0.0), _env("TOY_STALL_EVERY", 0, int)
    stall_s, lr, every = _env("TOY_STALL_S", 0.3), _env("TOY_LR", 0.05), _env("TOY_CKPT_EVERY", 0, int)
    block = 5
    log.header(plan, {"global_batch_size": 8, "opt_base_learning_rate": lr})
    torch.manual_seed(plan.seed)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    ck = RunCheckpointer(rt, every)
    cap, batch_mb = _env("TOY_MEM_CAP_MB", 0, int), _env("TOY_BATCH_MB", 0, int)
    if cap:
        import resource as res

        vm = int(next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmSize:")))
        limit = (vm // 1024 + cap) << 20
        res.setrlimit(res.RLIMIT_AS, (limit, limit))

    def load(state, meta):
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])

    resumed = ck.resume(load)
    step = resumed["step"] if resumed else 0
    log.init_stop()
    log.run_start()
    timings = Timings(rt)
    seen = open(Path(plan.run_dir) / "seen.txt", "a")  # noqa: SIM115 - data positions consumed
    ready = os.environ.get("TOY_READY_FILE")
    success = stopping = False
    try:
        while (step < steps or success) and not stopping:  # success: power mode trains on
            log.start("block_start", metadata={"first_epoch_num": step, "epoch_count": block})
            for _ in range(block):
                t0 = time.perf_counter()
                g = torch.Generator().manual_seed(step)
                x = torch.randn(8, 4, generator=g)
                if wait_s:
                    time.sleep(wait_s)
                t1 = time.perf_counter()
                if batch_mb:
                    activations = torch.ones(batch_mb << 18)  # float32: b MiB
                    del activations
                loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                time.sleep(step_s)
                if stall_every and (step + 1) % stall_every == 0:
                    time.sleep(stall_s)
                step += 1
                seen.write(f"{step}\n")
                seen.flush()
                timings.row(step, time.perf_counter() - t0, t1 - t0, samples=8, loss=loss.item())
                if ready and step >= 3:
                    Path(ready).touch()
                if rt.should_stop(step):
                    stopping = True
                    break
            log.end("block_stop", metadata={"first_epoch_num": step - block, "epoch_count": block})
            if stopping:
                break
            log.start("eval_start", metadata={"epoch_num": step})
            log.event("eval_accuracy", float(loss.item()), metadata={"epoch_num": step})
            log.end("eval_stop", metadata={"epoch_num": step})
            timings.flush()
            if step >= steps and not success:
                success = True
                log.run_stop(True)  # time-to-train ends here, as in gpt3's loop
            if success and (os.environ.get("TOY_NO_POWER_EXTENSION") or not rt.more_power_readings()):
                break  # power mode: the same blocks go on until every node has 60 readings
            if ck.due(step):
                ck.save(step, {"model": model.state_dict(), "optimizer": opt.state_dict()})
        _leave_collectives_in_flight(rt, _env("TOY_PENDING_COLLECTIVES", 0, int))
    finally:
        timings.close()
        seen.close()
    return RunOutcome(success)


_HELD: list = []
"""What the process keeps to its end (the group, as DDP's reducer holds it)."""


def _leave_collectives_in_flight(rt, n: int) -> None:
    """Start n all-reduces and drop them unwaited: gloo's worker threads then hold the last
    reference to Python-owned tensors while the process ends (rank exits are not synchronized)."""
    if not n or rt.world_size == 1:
        return
    import torch
    import torch.distributed as dist

    _HELD.append(dist.group.WORLD)  # kept to the end, as DDP's reducer keeps it
    for _ in range(n):
        dist.all_reduce(torch.ones(1 << 16), async_op=True)


class NoData(DataManifest):
    """The toy reads no data: nothing to prepare, ever."""

    def is_prepared(self, plan) -> bool:
        return True


def _toy() -> Benchmark:
    """The toy as a benchmark of its own: gpt3's rules, config and configs (its logs are gpt3
    logs the official checker accepts), this module's loop, no data."""
    gpt3 = benchmarks.get("gpt3")
    return Benchmark(
        name="toy",
        config=gpt3.config,
        folder=gpt3.folder,
        impl=Implementation(
            module="tests.toy_train",
            train=lazy("tests.toy_train:run"),
            prepare=lazy("tests.toy_train:prepare"),
            data=NoData(fields=()),
            power_extension=not os.environ.get("TOY_NO_POWER_EXTENSION"),
        ),
    )


def prepare(plan) -> None:
    """Never called (NoData is always prepared)."""


TOY = _toy()
"""Registered by the processes that run it (tests/toy_run.py; a test inside benchmarks.scratch()),
never on import: a test process that imports this module keeps the shipped registry."""

if __name__ == "__main__":
    from harness.train.entry import run as run_entry

    run_entry(TOY)
