"""Adam's step survives the tiny checkpoint and dist_checkpointing for both Adams megatron picks:
torch's (per-parameter step, this CPU host) and TE's FusedAdam (per-group step; a stand-in class
with TE's state layout, since TE does not install without CUDA). gpt3_adam_worker.py says how."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import worker_result


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    worker = Path(__file__).with_name("gpt3_adam_worker.py")
    folder = tmp_path_factory.mktemp("adam")
    return worker_result(worker, str(folder))


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["plain", "distributed"])
def test_torch_adam_keeps_its_step_per_parameter(result, optimizer):
    res = result[f"torch/{optimizer}"]
    assert res["inner"] == "AdamW" and res["saved"]["param_steps"] == [3.0], res
    for how in ("tiny", "dist_ckpt"):
        assert res[how]["error"] is None, (how, res[how])
        # each parameter has its own step tensor (torch Adam advances a shared one once per param)
        assert res[how]["param_steps"] == [3.0] and res[how]["own_step_tensor"], (how, res)
        # the next step is the saved run's 4th, bit for bit (a step counted from 1 again changes
        # Adam's bias correction, so every parameter)
        assert res[how]["next_step_equal"], (how, res)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["plain", "distributed"])
def test_fused_adam_keeps_its_step_per_group(result, optimizer):
    res = result[f"fused/{optimizer}"]
    assert res["inner"] == "FusedAdamLike" and res["saved"]["group_steps"] == [3], res
    assert res["tiny_steps"] == [3.0], res  # the tiny file stores it per parameter either way
    for how in ("tiny", "dist_ckpt"):
        assert res[how]["error"] is None, (how, res[how])
        # in the param groups, none in the parameters' state (TE's state_dict() would raise)
        assert res[how]["group_steps"] == [3] and res[how]["param_steps"] == [], (how, res)
        assert res[how]["next_step_equal"], (how, res)
