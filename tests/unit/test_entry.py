"""harness/train/entry.py: run_in_rank's exit codes and its promise that finish() always runs."""

from __future__ import annotations

import types

import pytest

from harness.core.benchmark import Implementation, RunOutcome, lazy
from harness.core.data_manifest import DataManifest
from harness.core.errors import ConfigError
from harness.train import entry, runtime


class FakeRuntime:
    def __init__(self, signal_received=None):
        self.signal_received = signal_received
        self.finished = None
        self.plan = types.SimpleNamespace(task="train", config={})

    def finish(self, success, metadata=None):  # the exit-code rule of runtime.Runtime.finish
        self.finished = (success, metadata)
        return 130 if self.signal_received is not None else (0 if success else 3)


class _Config:
    @staticmethod
    def model_validate(values):
        return values


@pytest.fixture
def train_module(monkeypatch):
    """A fake spec whose `run` the entry calls after start(); returns (set_behaviour, runtime)."""
    rt = FakeRuntime()
    monkeypatch.setattr(runtime, "start", lambda plan, config: rt)
    box = {}

    def behave(fn):
        box["run"] = fn

    return behave, rt, box


_BOX: dict = {}


def fake_train(rt):
    """The lazy target of the fake implementation: what the test set as its behaviour."""
    return _BOX["run"](rt)


def _run(box, plan="p.json") -> int:
    _BOX["run"] = box["run"]
    bench = types.SimpleNamespace(
        name="fake",
        config=_Config,
        impl=Implementation(
            module="fake_train",
            train=lazy(f"{__name__}:fake_train"),
            prepare=lazy(f"{__name__}:fake_train"),
            data=DataManifest(fields=()),
        ),
    )
    return entry.run_in_rank(bench, plan)


def _raise(exc):
    def run(rt):
        raise exc

    return run


@pytest.mark.parametrize(
    "result,code,finished",
    [
        (RunOutcome(True), 0, (True, None)),
        (RunOutcome(False), 3, (False, None)),
        (RunOutcome(True, {"epoch_num": 2}), 0, (True, {"epoch_num": 2})),
        (RunOutcome(False, None), 3, (False, None)),
    ],
)
def test_result_and_codes(train_module, result, code, finished):
    behave, rt, box = train_module
    behave(lambda rt: result)
    assert _run(box) == code
    assert rt.finished == finished


def test_harness_error_is_one_last_line_and_its_code(train_module, capsys):
    behave, rt, box = train_module
    behave(_raise(ConfigError("no latents in /data")))
    assert _run(box) == 2
    assert rt.finished == (False, None)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: no latents in /data"]


def test_crash_is_1_with_a_traceback_and_the_log_still_finished(train_module, capsys):
    behave, rt, box = train_module
    behave(_raise(RuntimeError("boom")))
    assert _run(box) == 1
    assert rt.finished == (False, None)
    assert "Traceback" in capsys.readouterr().err


def test_a_signal_wins_over_what_training_raised_on_the_way_out(train_module):
    behave, rt, box = train_module
    rt.signal_received = 15
    behave(_raise(ConfigError("collective failed")))
    assert _run(box) == 130
    behave(lambda rt: RunOutcome(False))
    assert _run(box) == 130


def test_an_import_failure_still_finishes(train_module):
    behave, rt, box = train_module

    def run(rt):
        import fake_train_missing  # noqa: F401 - the training code fails to import

    behave(run)
    assert _run(box) == 1
    assert rt.finished == (False, None)


def test_a_loop_that_returns_anything_but_a_run_outcome_is_a_crash_not_a_success(train_module, capsys):
    """The one result type: the bool or tuple the loops used to return is a bug now, said so."""
    behave, rt, box = train_module
    behave(lambda rt: True)
    assert _run(box) == 1
    assert rt.finished == (False, None)
    assert "returned bool, not RunOutcome" in capsys.readouterr().err
