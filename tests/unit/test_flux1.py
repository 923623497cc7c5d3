"""flux1 without training: its rules read from the package, its config's arithmetic, the
reference's init (velocity 0), the validation metric (the mean of the per-timestep means), the
layout-free random draws, and the preprocessed format's reader on good and bad folders."""

from __future__ import annotations

import types

import pytest
import torch

import benchmarks
from benchmarks import tiny_rules
from harness.core.errors import ConfigError
from harness.core.schema import load_yaml

BENCH = benchmarks.get("flux1")


def _cfg(**over):
    tiny = load_yaml(BENCH.configs_dir / "tiny.yaml")["config"]
    return BENCH.config.model_validate({**tiny, **over})


@pytest.mark.parametrize("ruleset", ["6.0.0", "6.1.0"])
def test_tiny_rules_change_only_the_eval_cadence(ruleset):
    recs = {r["KEY"]["NAME"]: r["KEY"] for r in tiny_rules.benchmark_rules(ruleset, "flux1", BENCH)}
    assert "1024" in recs["global_batch_size"]["POST"]
    assert recs["evaluation_frequency"]["CHECK"].strip() == "v['value'] == s['eval_interval_samples']"
    # the quality window is the package's: the tiny target is the full one
    assert "0.586" in recs["eval_accuracy"]["ATLEAST_ONE_CHECK"]
    assert BENCH.rules.quality[0].tiny == BENCH.rules.quality[0].full == 0.586


def test_eval_cadence_and_warmup_arithmetic():
    full = BENCH.config.model_validate({})
    assert (full.eval_interval_steps, full.evaluation_frequency) == (512, 262144)
    odd = BENCH.config.model_validate({"global_batch_size": 3000})
    assert odd.evaluation_frequency == 88 * 3000  # ceil(262144 / 3000) x 3000 (6.1.0's rule)
    assert full.lr_at(0) == pytest.approx(2e-4 / 1600) and full.lr_at(1599) == full.lr_at(10**6) == 2e-4
    assert _cfg().lr_at(0) == 2e-3  # tiny: no warmup
    with pytest.raises(ValueError, match="axes_dims_rope"):
        BENCH.config.model_validate({"axes_dims_rope": [16, 56, 48]})


def test_the_untrained_transformer_predicts_zero_velocity():
    from reference_impls.flux1 import model as M

    cfg = _cfg()
    torch.manual_seed(0)
    m = M.build(cfg)
    x = torch.randn(3, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
    out = m(
        hidden_states=M.pack(x),
        encoder_hidden_states=torch.randn(3, cfg.text_max_length, cfg.joint_attention_dim),
        pooled_projections=torch.randn(3, cfg.pooled_projection_dim),
        timestep=torch.rand(3),
        img_ids=M.image_ids(cfg.latent_size, "cpu"),
        txt_ids=M.text_ids(cfg.text_max_length, "cpu"),
    ).sample
    assert out.shape == (3, (cfg.latent_size // 2) ** 2, cfg.in_channels) and not out.any()
    # the rest is not zero: q/k/v (a fused tensor's Xavier bound) and the MLPs train from step 1
    q = m.transformer_blocks[0].attn.to_q.weight
    bound = (6 / (4 * q.shape[0])) ** 0.5
    assert q.abs().max() <= bound and q.abs().max() > 0.9 * bound


def test_draws_do_not_depend_on_how_the_samples_are_split():
    from reference_impls.flux1 import model as M

    whole = M.draws(5, range(0, 4), (2, 2, 2))
    parts = [M.draws(5, range(a, b), (2, 2, 2)) for a, b in ((0, 1), (1, 4))]
    for i in range(3):
        assert torch.equal(whole[i], torch.cat([p[i] for p in parts]))
    assert not torch.equal(M.draws(5, [0], (4,))[0], M.draws(5, [0], (4,), evaluation=True)[0])


class _Split:
    """Validation rows whose posterior mean is 0 and log-variance -inf: x0 = -shift x scale = 0."""

    def __init__(self, cfg, n):
        self.cfg, self.n = cfg, n

    def batch(self, rows):
        c = self.cfg
        lat = (len(rows), c.latent_channels, c.latent_size, c.latent_size)
        return {
            "t5_encodings": torch.zeros(len(rows), c.text_max_length, c.joint_attention_dim),
            "clip_encodings": torch.zeros(len(rows), c.pooled_projection_dim),
            "mean": torch.zeros(lat),
            "logvar": torch.full(lat, -1e4),
            "timestep": torch.tensor([r % c.eval_timesteps for r in rows]),
        }


def test_validation_is_the_mean_of_the_per_timestep_means():
    """10 rows over 8 timesteps (0 and 1 have two): a plain mean over the rows would weigh them twice."""
    from reference_impls.flux1 import model as M
    from reference_impls.flux1.evaluate import Validation

    cfg = _cfg(eval_samples=10, eval_batch_size=4)
    rt = types.SimpleNamespace(rank=0, world_size=1, device="cpu")
    v = Validation(cfg, _Split(cfg, 10), rt, shift=0.0, scale=1.0)

    def zero(**kw):  # predicts velocity 0: the loss is mean(noise^2) per row
        return types.SimpleNamespace(sample=torch.zeros_like(kw["hidden_states"]))

    got = v(_Model(zero))
    _, noise, _ = M.draws(
        cfg.eval_seed, range(10), (cfg.latent_channels, cfg.latent_size, cfg.latent_size), True
    )
    per_row = (noise**2).flatten(1).mean(1).double()
    per_t = [per_row[[r for r in range(10) if r % 8 == t]].mean() for t in range(8)]
    assert got == pytest.approx(float(torch.stack(per_t).mean()), rel=1e-6)
    assert got != pytest.approx(float(per_row.mean()), rel=1e-4)  # the plain mean: 9.0e-4 apart


class _Model:
    """What Validation calls: eval(), train() and the forward."""

    def __init__(self, forward):
        self.forward = forward

    def eval(self):
        pass

    def train(self):
        pass

    def __call__(self, **kw):
        return self.forward(**kw)


def test_reader_round_trip_and_bad_folders(tmp_path):
    from reference_impls.flux1 import data

    cfg = _cfg()
    t = torch.randn(cfg.latent_channels, cfg.latent_size, cfg.latent_size)
    assert torch.equal(data.decode(data.npy_bf16(t)), t.to(torch.bfloat16).float())
    row = {
        "__key__": "0",
        "t5_encodings": data.npy_bf16(torch.ones(cfg.text_max_length, cfg.joint_attention_dim)),
        "clip_encodings": data.npy_bf16(torch.ones(cfg.pooled_projection_dim)),
        "mean": data.npy_bf16(t),
        "logvar": data.npy_bf16(t),
    }
    data.write_split(tmp_path / "ok", [row, row], timesteps=False)
    split = data.Split(cfg, tmp_path / "ok", "x", timesteps=False)
    assert split.n == 2 and torch.equal(split.batch([1])["mean"][0], t.to(torch.bfloat16).float())
    with pytest.raises(ConfigError, match="state.json: missing"):
        data.Split(cfg, tmp_path / "none", "x", timesteps=False)
    with pytest.raises(ConfigError, match="column\\(s\\) timestep missing"):
        data.Split(cfg, tmp_path / "ok", "x", timesteps=True)
    wide = dict(row, mean=data.npy_bf16(torch.zeros(4, 8, 8)))
    data.write_split(tmp_path / "wide", [wide], timesteps=False)
    with pytest.raises(ConfigError, match="mean has shape \\(4, 8, 8\\)"):
        data.Split(cfg, tmp_path / "wide", "x", timesteps=False)
    (tmp_path / "ok" / "data-00000-of-00001.arrow").write_bytes(b"not arrow")
    with pytest.raises(ConfigError, match="not an Arrow stream file"):
        data.Split(cfg, tmp_path / "ok", "x", timesteps=False)


def test_vae_factors_take_each_given_value_and_read_each_null_one(tmp_path):
    """tiny_images.vae_factors, flux1's and stable_diffusion's one reader: a given shift with a
    null scale keeps the shift (flux1's own reader took both from the file, ignoring the --set)."""
    import json

    from reference_impls.tiny_images import vae_factors

    (tmp_path / "config.json").write_text(json.dumps({"shift_factor": 0.25, "scaling_factor": 0.5}))
    assert vae_factors(None, None, tmp_path, "x") == (0.25, 0.5)
    assert vae_factors(0.1, None, tmp_path, "x") == (0.1, 0.5)
    assert vae_factors(0.1, 2.0, tmp_path / "none", "x") == (0.1, 2.0)  # nothing read
    with pytest.raises(ConfigError, match="missing tiny VAE config"):
        vae_factors(None, None, tmp_path / "none", "x")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="no VAE shift/scale \\(KeyError"):
        vae_factors(None, None, tmp_path, "x")
