"""The JSON that `bench/gpu_check.py` writes (schema `mlperf-harness/gpu-check/1`) and the context each
check runs in (device, sizes, the time budget).

Every check is one `Check`: `status` is ok, failed, refused (the harness said no with one line, as it
must for a switch it does not implement or a library it needs) or skipped (a library for that path is
missing here, or the CPU smoke test cannot run it); `path` says which implementation produced the
figures; `detail` holds the error, refusal or reason in one line. The script exits 4 if any check
failed, 0 otherwise; refused and skipped checks are listed under `not_checked`.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "mlperf-harness/gpu-check/1"
Status = Literal["ok", "failed", "refused", "skipped"]


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    """Unique, '<what>/<path>/<precision>' for figures, e.g. 'gpt3_layer/mcore-te/fp8'."""
    kind: Literal["tests", "run", "switch", "layer", "step"]
    status: Status
    path: str = ""
    """The implementation behind the figures (megatron-core + TE, plain torch + _scaled_mm, ...)."""
    seconds: float = 0.0
    """Wall time of the check itself."""
    figures: dict[str, float | int | str | bool | None | dict | list] = {}
    detail: str = ""


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(SCHEMA, alias="schema")
    smoke: bool
    """True for the CPU smoke run (toy sizes, CI only): its figures are not GPU figures."""
    device: dict
    """GPU name, compute capability, memory, torch and CUDA versions, the libraries found."""
    peak_tflops: dict[str, float]
    """Dense datasheet peaks MFU is computed against (empty: unknown GPU, no MFU)."""
    budget_s: float
    wall_s: float
    checks: list[Check]
    failed: list[str]
    not_checked: list[str]

    def dump(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)


def tail(text: str, n: int = 40) -> str:
    """The last n lines (at most 6,000 characters): what a failed check keeps of its output or
    traceback, since a GPU host's scratch folder may be gone when the report is read and one line
    rarely says why."""
    return "\n".join((text or "").rstrip().splitlines()[-n:])[-6000:]


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


@dataclass
class Context:
    device: str
    smoke: bool
    budget_s: float
    warmup: int = 3
    iters: int = 10
    peaks: dict = field(default_factory=dict)
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return self.budget_s - (time.monotonic() - self.start)

    def out_of_time(self, name: str, kind: str, path: str = "") -> Check:
        return Check(
            name=name,
            kind=kind,
            status="failed",
            path=path,
            detail=f"not run: the {self.budget_s:.0f} s budget was spent",
        )

    def measure(self, name: str, kind: str, path: str, fn: Callable[[], dict], unavailable=None) -> Check:
        """Run one in-process measurement; any exception becomes a failed check with one line."""
        if unavailable:
            return Check(name=name, kind=kind, status="skipped", path=path, detail=unavailable)
        if self.remaining() <= 0:
            return self.out_of_time(name, kind, path)
        t0 = time.monotonic()
        try:
            figures, status, detail = fn(), "ok", ""
        except Exception as e:  # a failed figure is reported, and the next one still runs
            figures, status, detail = {"traceback": tail(traceback.format_exc(), 25)}, "failed", one_line(e)
        finally:
            self.release()
        return Check(
            name=name,
            kind=kind,
            status=status,
            path=path,
            seconds=time.monotonic() - t0,
            figures=figures,
            detail=detail,
        )

    def release(self) -> None:
        """Free what the last measurement left (its model, optimizer, cached blocks)."""
        gc.collect()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()


def summarize(ctx: Context, checks: list[Check], device: dict) -> Report:
    return Report(
        smoke=ctx.smoke,
        device=device,
        peak_tflops=ctx.peaks,
        budget_s=ctx.budget_s,
        wall_s=time.monotonic() - ctx.start,
        checks=checks,
        failed=[c.name for c in checks if c.status == "failed"],
        not_checked=[
            f"{c.name}: {c.status}: {c.detail}" for c in checks if c.status in ("refused", "skipped")
        ],
    )
