"""Every number a user can `--set` has a bound, so a nonsense value is one line at resolve time,
not a rank that misbehaves. Found 2026-12-06: `--set eval_interval_samples=-1` on gpt3 made the
eval interval ceil(-1 / 16) = 0 steps and the rank evaluated at step 0 forever (a hang).

The defect caught: a new scalar field in any benchmark's typed config (the ones to come included)
without `Field(..., ge=/gt=)`."""

from __future__ import annotations

import types
import typing

import annotated_types as at
import pytest

import benchmarks

UNBOUNDED_OK = {
    "vae_shift_factor": "a shift of the latents: any real number (SD's VAE config)",
}
"""Scalar fields that may take any value, and why."""


def _scalar_fields():
    for b in benchmarks.registered():
        if b.config is None:
            continue
        for name, f in b.config.model_fields.items():
            scalar_or_optional = typing.get_origin(f.annotation) in (None, typing.Union, types.UnionType)
            kinds = typing.get_args(f.annotation) or (f.annotation,)
            if scalar_or_optional and any(k in (int, float) for k in kinds) and bool not in kinds:
                yield b.name, name, f


def test_every_scalar_field_has_a_lower_bound():
    missing = [
        f"{bench}.{name}"
        for bench, name, f in _scalar_fields()
        if name not in UNBOUNDED_OK
        and not any(isinstance(m, (at.Ge, at.Gt, at.Interval)) for m in f.metadata)
    ]
    assert not missing, f"give these a Field(ge=/gt=) bound (or a reason in UNBOUNDED_OK): {missing}"


@pytest.mark.parametrize(
    "bench,setting",
    [
        ("gpt3", "eval_interval_samples=-1"),
        ("gpt3", "dropout=1.5"),
        ("llama2_70b_lora", "rms_norm_eps=0"),
        ("sd", "beta_end=-0.1"),
    ],
)
def test_a_value_out_of_bounds_is_one_line_exit_2(mlperf, bench, setting):
    r = mlperf("run", bench, "--set", setting, "--dry-run")
    field = setting.split("=")[0]
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[-500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"field '{field}'" in lines[0] and "Traceback" not in r.stderr, r.stderr
