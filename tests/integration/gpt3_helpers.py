"""Shared by the gpt3 integration tests: one prepared tiny data dir per pytest session, plans
from the harness's own planner, and the official checker with the tiny rules (tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import helpers
from helpers import REPO, env, events, official_check  # noqa: F401  (the gpt3 tests import them from here)


def make_plan(tmp_path: Path, data_dir: Path, seed: int, nproc: int | None = None, sets=()):
    return helpers.make_plan(
        "gpt3", tmp_path, runs=1, seed=seed, sets=list(sets), nproc_per_node=nproc, data_dir=data_dir
    )


def prepared_data_dir(tmp_path_factory) -> Path:
    """Prepare once per session (shared by every gpt3 test module; ~10 s)."""
    data_dir = tmp_path_factory.getbasetemp() / "gpt3-tiny-data"
    plan = make_plan(tmp_path_factory.getbasetemp() / "gpt3-prepare", data_dir, seed=0)
    from reference_impls.gpt3 import manifest

    if not manifest.is_prepared(plan):
        r = helpers.run_entry("reference_impls.gpt3", plan, env=env(), task="prepare")
        assert r.returncode == 0, r.stderr[-3000:]
    return data_dir


def train(plan, nproc: int = 1, timeout: float = 600):
    return helpers.run_entry("reference_impls.gpt3", plan, nproc=nproc, timeout=timeout, env=env())
