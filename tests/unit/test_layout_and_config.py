import pytest

import benchmarks
from harness.core import layout
from harness.core.errors import ConfigError
from harness.resolve import config


def resolve(system, size, sets=()):
    d = benchmarks.get("gpt3")
    return config.resolve(d, size, system, "closed", config.parse_sets(sets))


def test_gpt3_dgx_h100x64_matches_nvidia_record_and_closed_rules():
    cfg, prov, _ = resolve("dgx-h100x64", "full")
    lay = layout.derive(cfg, 64, 8, 8, cfg.num_layers, type(cfg).SUPPORTS)
    assert (lay.world_size, lay.tp, lay.pp, lay.vp, lay.dp) == (512, 4, 8, 4, 16)
    assert (lay.micro_batch_size, lay.global_batch_size, lay.grad_accum) == (2, 2304, 72)
    # closed rules at GBS 2304: LR 2e-5; ceil(265*1536/2304)=177; ceil(108600*1536/2304)=72400
    assert cfg.opt_base_learning_rate == 2e-5
    assert cfg.opt_learning_rate_warmup_steps == 177
    assert cfg.opt_learning_rate_decay_steps == 72400
    assert cfg.init_checkpoint_step == 2667
    assert prov["opt_learning_rate_warmup_steps"] == "derived"
    assert prov["global_batch_size"] == "system:dgx-h100x64"


def test_gpt3_dgx_h100x1452_record_layout():
    cfg, _, _ = resolve("dgx-h100x1452", "full")
    lay = layout.derive(cfg, 1452, 8, 8, cfg.num_layers, type(cfg).SUPPORTS)
    assert (lay.tp, lay.pp, lay.vp, lay.dp, lay.grad_accum, lay.global_batch_size) == (4, 6, 8, 484, 6, 2904)


def test_provenance_tracks_set_over_size():
    cfg, prov, sources = resolve("cpu-local", "tiny", ["global_batch_size=32"])
    assert cfg.global_batch_size == 32 and prov["global_batch_size"] == "--set"
    assert prov["num_layers"] == "size:tiny" and prov["opt_adam_beta_1"] == "default"
    assert sources[-1].startswith("--set")


@pytest.mark.parametrize(
    "sets, match",
    [
        (["opt_adam_beta_2=0.99"], "fixed at 0.95 by the closed-division rules"),
        (["global_batch_sise=8"], "did you mean 'global_batch_size'"),
        (["global_batch_size=lots"], "field 'global_batch_size'"),
        (["no_equals_sign"], "expected key=value"),
    ],
)
def test_bad_overrides(sets, match):
    with pytest.raises(ConfigError, match=match):
        resolve("dgx-h100x64", "full", sets)


def test_open_full_size_may_change_fixed_hyperparameter():
    d = benchmarks.get("gpt3")
    cfg, _, _ = config.resolve(d, "full", "dgx-h100x64", "open", {"opt_adam_beta_2": 0.99})
    assert cfg.opt_adam_beta_2 == 0.99


class _Cfg:
    def __init__(self, tp=1, pp=1, vp=1, cp=1, mbs=1, gbs=8):
        self.tensor_model_parallel_size, self.pipeline_model_parallel_size = tp, pp
        self.virtual_pipeline_model_parallel_size, self.context_parallel_size = vp, cp
        self.micro_batch_size, self.global_batch_size = mbs, gbs


ALL = ("tp", "pp", "vp", "cp")


@pytest.mark.parametrize(
    "cfg, match",
    [
        (_Cfg(tp=3), "does not divide the world size 8"),
        (_Cfg(tp=16), "does not divide"),
        (_Cfg(gbs=12, mbs=1, tp=1), "not a multiple of DP 8"),
        (_Cfg(vp=2), "needs pipeline parallelism"),
    ],
)
def test_layout_errors_name_the_numbers(cfg, match):
    with pytest.raises(ConfigError, match=match):
        layout.derive(cfg, 1, 8, 8, None, ALL)


def test_tp_beyond_nvlink_domain_and_unsupported_degree():
    with pytest.raises(ConfigError, match="exceeds the 8 accelerators of one NVLink domain"):
        layout.derive(_Cfg(tp=16, gbs=16), 2, 8, 8, None, ALL)
    with pytest.raises(ConfigError, match="data parallelism only"):
        layout.derive(_Cfg(tp=2), 1, 8, 8, None, ())


def test_layers_must_split_into_pipeline_chunks():
    with pytest.raises(ConfigError, match="96 layers do not split into PP 5"):
        layout.derive(_Cfg(pp=5, gbs=40), 1, 10, 10, 96, ALL)


def test_registry_aliases():
    assert benchmarks.get("GPT3").name == "gpt3"
    with pytest.raises(ConfigError, match="did you mean 'gpt3'"):
        benchmarks.get("gpt4")
