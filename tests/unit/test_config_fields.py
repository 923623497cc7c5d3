"""Every field of every benchmark config is honoured or refused: no silent switches (issue 12).

Each field has one classification in config_fields_table.py (kinds explained there); a field added
without one fails `test_every_field_is_classified`. Unit-level only: tiny objects, no training.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
from pathlib import Path

import pytest
from config_fields_table import FIELDS
from helpers import run_probe

import benchmarks
from benchmarks.base import gpu_only
from harness.core.errors import ConfigError
from harness.core.layout import DEGREES, derive
from harness.core.schema import load_yaml
from harness.resolve.runplans import resolve_runs

REPO = Path(__file__).resolve().parents[2]
GPU_SYSTEM = "dgx-h100x1"  # one node of 8; --nproc-per-node picks 1 or 2 ranks

CASES = [(b, f) for b, table in FIELDS.items() for f in table]


def _entry(bench, field):
    kind, alt, *extra = FIELDS[bench][field]
    return kind, alt, (extra[0] if extra else {})


@functools.cache
def _tiny_values(bench) -> dict:
    return load_yaml(benchmarks.get(bench).configs_dir / "tiny.yaml")["config"]


def _cfg(bench, **over):
    """The tiny config with `over` applied as a user's values (derived fields derived again)."""
    return benchmarks.get(bench).config.model_validate({**_tiny_values(bench), **over})


def _layout(cfg, procs=1):
    return derive(cfg, 1, procs, num_layers=getattr(cfg, "num_layers", None), supports=type(cfg).SUPPORTS)


def _variant(bench, field):
    _, alt, extra = _entry(bench, field)
    return _cfg(bench, **extra, **{field: alt})


def _resolve(bench, system, sets: dict, procs=1):
    yml = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sets.items()]
    return resolve_runs(
        benchmarks.get(bench), system, size="tiny", runs=1, seed=1, sets=yml, nproc_per_node=procs
    )


def _procs(sets: dict) -> int:
    keys = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
    # EP is carved out of TP x CP x DP: its ranks are DP ranks here
    if sets.get("expert_model_parallel_size", 1) > 1 and not any(k in sets for k in keys):
        return sets["expert_model_parallel_size"]
    n = 1
    for k in keys:
        n *= sets.get(k, 1)
    return n


def _named(v, names: tuple[str, ...]) -> bool:
    return (isinstance(v, ast.Name) and v.id in names) or (isinstance(v, ast.Attribute) and v.attr in names)


@functools.cache
def _reads(bench) -> frozenset[str]:
    """Config fields the implementation reads: off its config (cfg.x, c.x, self.cfg.x, rt.cfg.x)
    or, for the parallel degrees, off the derived layout (layout.cp, plan.layout.tp, lay.pp), in
    the package of its training loop (a family's, reference_impls/megatron_gpt for gpt3)."""
    out = set()
    package = benchmarks.get(bench).impl.train.target.partition(":")[0].rpartition(".")[0]
    for f in (REPO / package.replace(".", "/")).glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                if _named(node.value, ("cfg", "c")):
                    out.add(node.attr)
                elif _named(node.value, ("layout", "lay")) and node.attr in DEGREES:
                    out.add(DEGREES[node.attr])
    return frozenset(out)


# ---- probes: what the implementation builds from a config, part by part ------------------------


def _probe_sd(part, cfg):
    import torch

    from reference_impls.stable_diffusion import model as M

    if part == "unet":
        u = M.build_unet(cfg)
        return [repr(dict(u.config)), sorted({type(p).__name__ for p in u.attn_processors.values()})]
    if part == "noise":
        return repr(dict(M.noise_scheduler(cfg).config))
    if part == "sampler":
        s = M.sampler(cfg)
        s.set_timesteps(10)
        return s.timesteps.tolist()
    if part == "optim":
        return repr(M.optimizer(cfg, [torch.nn.Parameter(torch.zeros(1))]).defaults)
    if part == "lr":
        return [M.lr_at(cfg, k) for k in (1, 3, 10, 30, 2000)]
    raise KeyError(part)


def _probe_llama2(part, cfg):
    import torch

    from harness.train.adamw import adamw
    from reference_impls.llama2_70b_lora import model as M

    if part == "optim":  # the optimizer train.run builds (harness/train/adamw.py)
        return repr(adamw(cfg, [torch.nn.Parameter(torch.zeros(1))]).defaults)
    base = M.build_base(cfg, "meta")  # shapes and config without memory
    if part == "model":
        return [repr(base.config.to_dict()), [(n, tuple(p.shape)) for n, p in base.named_parameters()]]
    if part == "lora":
        m = M.apply_lora(base, cfg)
        shapes = [(n, tuple(p.shape)) for n, p in m.named_parameters() if p.requires_grad]
        return [repr(m.peft_config["default"]), shapes]
    raise KeyError(part)


def _probe_megatron(bench, part, cfg):
    from reference_impls.megatron_gpt import model as gm

    if part == "tcfg":  # pure: the megatron TransformerConfig of the CPU path
        mp = cfg.tensor_model_parallel_size * cfg.pipeline_model_parallel_size * cfg.context_parallel_size
        return repr(gm.transformer_config(cfg, _layout(cfg, mp), "cpu"))
    return _megatron_built(bench)[_megatron_key(cfg)][part]


def _probe_flux1(part, cfg):
    import torch

    from harness.train.adamw import adamw
    from reference_impls.flux1 import model as M

    if part == "model":
        with torch.device("meta"):
            m = M.build(cfg)
        return [repr(dict(m.config)), m.is_gradient_checkpointing]
    if part == "optim":
        return repr(adamw(cfg, [torch.nn.Parameter(torch.zeros(1))]).defaults)
    if part == "lr":
        return [cfg.lr_at(k) for k in (0, 2, 10, 300)]
    raise KeyError(part)


PROBES = {
    "stable_diffusion": _probe_sd,
    "flux1": _probe_flux1,
    "llama2_70b_lora": _probe_llama2,
    "gpt3": functools.partial(_probe_megatron, "gpt3"),
    "llama31_8b": functools.partial(_probe_megatron, "llama31_8b"),
    "gpt_oss_20b": functools.partial(_probe_megatron, "gpt_oss_20b"),
    "deepseekv3_671b": functools.partial(_probe_megatron, "deepseekv3_671b"),
}

# The Megatron-GPT family's model, optimizer, scheduler and DDP are built by megatron-core, whose
# CPU layer patches torch process-wide: all variants of a benchmark are built in one fresh
# interpreter (world of 1 over gloo).
_MEGATRON_BUILD = """
import json, os, sys, torch, torch.distributed as dist
import benchmarks
from harness.core.layout import DEGREES, derive
from reference_impls.megatron_gpt import model as gm, train
from harness.train.runtime import init_one_process_group
init_one_process_group("gloo")
todo = json.load(sys.stdin)
cls = benchmarks.get(todo["bench"]).config
out, ready = {}, False
for key, values in todo["cfgs"].items():
    cfg = cls.model_validate(values)
    lay = derive(cfg, 1, 1, num_layers=cfg.num_layers, supports=cls.SUPPORTS)
    if not ready:
        train.init_parallel(lay, 1)
        ready = True
    torch.manual_seed(1)
    model, opt, sched, _ = gm.build(cfg, lay, "cpu")
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    rope = getattr(model[0].module, "rotary_pos_emb", None)
    out[key] = {
        "model": [[n, list(p.shape), round(float(p.float().std()), 6) if p.numel() > 1 else 0]
                  for n, p in model[0].module.named_parameters()],
        "optim": repr([groups, opt.config.clip_grad]),
        "sched": repr([sched.max_lr, sched.min_lr, sched.lr_warmup_steps, sched.lr_decay_steps]),
        "ddp": repr(model[0].ddp_config),
        "rope": repr(rope.inv_freq.tolist() if rope is not None else None),
    }
train._teardown()
print("PROBE" + json.dumps(out))
"""


def _megatron_key(cfg) -> str:
    return json.dumps(cfg.model_dump(), sort_keys=True)


@functools.cache
def _megatron_built(bench: str) -> dict:
    cfgs = [_cfg(bench)] + [_variant(bench, f) for f, e in FIELDS[bench].items() if e[0] in MEGATRON_BUILT]
    todo = {"bench": bench, "cfgs": {_megatron_key(c): c.model_dump() for c in cfgs}}
    return run_probe(_MEGATRON_BUILD, stdin=json.dumps(todo))


MEGATRON_BUILT = ("build:model", "build:optim", "build:sched", "build:ddp", "build:rope")


# ---- the tests --------------------------------------------------------------------------------


def test_every_field_is_classified():
    """A new config field must say how it is honoured (or refused) here. Benchmarks without an
    implementation have nothing to honour a field yet (their docstrings: test_moe_benchmarks.py)."""
    for bench in benchmarks.runs():
        fields = set(benchmarks.get(bench).config.model_fields)
        table = set(FIELDS[bench])
        assert fields - table == set(), f"{bench}: unclassified config fields"
        assert table - fields == set(), f"{bench}: classified fields the config lacks"


@pytest.mark.parametrize("bench", list(FIELDS))
def test_every_field_has_a_docstring(bench):
    cls = benchmarks.get(bench).config
    assert [f for f, info in cls.model_fields.items() if not (info.description or "").strip()] == []


@pytest.mark.parametrize("bench", list(FIELDS))
def test_switch_declarations_match_the_classification(bench):
    """SWITCHES (what resolve checks) and this table agree; gpu_only() is what the GPU check turns on."""
    cls = benchmarks.get(bench).config
    kinds = {f: _entry(bench, f)[0] for f in FIELDS[bench]}
    assert set(gpu_only(cls)) == {f for f, k in kinds.items() if k == "gpu"}
    assert {f for f, s in cls.SWITCHES.items() if not s.on} == {f for f, k in kinds.items() if k == "refused"}
    for name, sw in cls.SWITCHES.items():
        assert sw.why or sw.on == ("cpu", "gpu"), f"{bench}.{name}: a refused switch needs its reason"
        assert set(sw.needs) <= set(cls.SWITCHES), f"{bench}.{name} needs an undeclared switch"


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0].startswith("build:")])
def test_built_object_changes(bench, field):
    part = _entry(bench, field)[0].split(":", 1)[1]
    probe = PROBES[bench]
    assert probe(part, _variant(bench, field)) != probe(part, _cfg(bench)), f"{field} changed nothing"


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0] == "plan"])
def test_plan_layout_changes(bench, field):
    _, alt, extra = _entry(bench, field)
    sets = {**extra, field: alt}
    key = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp"}.get(field, field)
    key = "ep" if field == "expert_model_parallel_size" else key
    key = "vp" if field.startswith("virtual") else key
    base = _resolve(bench, "cpu-local", {}).plans[0].layout
    new = _resolve(bench, "cpu-local", sets, _procs(sets)).plans[0].layout
    assert getattr(new, key) == alt != getattr(base, key)


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0].startswith("via:")])
def test_derived_value_changes_and_is_read(bench, field):
    attr = _entry(bench, field)[0].split(":", 1)[1]

    def value(cfg):
        v = getattr(cfg, attr)
        if not callable(v):
            return v
        if not inspect.signature(v).parameters:  # a config method the code calls (start_step())
            return v()
        return [v(s) for s in (0, 3, 30, 300, 900)]

    assert value(_variant(bench, field)) != value(_cfg(bench))
    assert attr in _reads(bench), f"the code of {bench} never reads cfg.{attr}"


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0] in ("read", "gpu")])
def test_read_by_the_implementation(bench, field):
    assert field in _reads(bench), f"the code of {bench} never reads cfg.{field}"
    _variant(bench, field)  # the alternative is a valid value (so the entry means something)


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0] == "data"])
def test_data_fields_fingerprint_the_data(bench, field):
    data = benchmarks.get(bench).impl.data
    fingerprint = set(data.fields) | set(data.tiny_fields)
    assert field in fingerprint, f"{field} shapes the data but is not in {bench}'s manifest"
    assert field in _reads(bench), f"the code of {bench} never reads cfg.{field}"


@pytest.mark.parametrize("bench, field", [c for c in CASES if _entry(*c)[0] == "fixed"])
def test_fixed_fields_admit_one_value(bench, field):
    with pytest.raises(ValueError, match=field):
        _variant(bench, field)


@pytest.mark.parametrize(
    "bench, field", [c for c in CASES if _entry(*c)[0] in ("gpu", "refused", "unsupported")]
)
def test_refused_where_not_honoured(bench, field):
    """gpu: refused on CPU, accepted on a GPU system; refused/unsupported: refused on both."""
    kind, alt, extra = _entry(bench, field)
    sets = {**extra, field: alt}
    procs = _procs(sets)
    with pytest.raises(ConfigError) as cpu:
        _resolve(bench, "cpu-local", sets, procs)
    msg = str(cpu.value)
    assert "\n" not in msg and any(msg.startswith(k) for k in sets), msg  # this switch or one it needs
    if kind == "gpu":
        assert "needs a GPU" in msg
        _resolve(bench, GPU_SYSTEM, sets, procs)
    else:
        with pytest.raises(ConfigError, match=field):
            _resolve(bench, GPU_SYSTEM, sets, procs)


def test_gpu_path_configs_follow_their_switches():
    """Where the GPU path's settings are pure, the CPU proves them too (megatron config, SDPA)."""
    from reference_impls.megatron_gpt import model as gm

    base = _cfg("gpt3")
    lay = _layout(base)
    t = gm.transformer_config(base, lay, "cuda:0")
    assert t.fp8 is None and t.cuda_graph_impl == "none" and not t.bf16
    on = _cfg("gpt3", fp8=True, cuda_graphs=True, precision="bf16")
    t = gm.transformer_config(on, lay, "cuda:0")
    assert t.fp8 == "hybrid" and t.cuda_graph_impl == "local" and t.bf16
    assert _probe_sd("unet", _cfg("stable_diffusion", flash_attention=True))[1] == ["FlashOnly"]


def test_flash_attention_runs_the_unet_with_flash_only():
    """flash_attention=true: inside the UNet's attention only PyTorch's flash SDPA kernel is enabled
    (PyTorch's flash kernel also runs on CPU, so the tiny UNet's forward proves it here)."""
    import torch

    from reference_impls.stable_diffusion import model as M

    for flash, math_enabled in ((False, {True}), (True, {False})):
        cfg = _cfg("stable_diffusion", flash_attention=flash)
        unet = M.build_unet(cfg)
        seen = []
        for m in unet.modules():
            if type(m).__name__ == "Attention":
                m.to_q.register_forward_hook(
                    lambda *_, seen=seen: seen.append(torch.backends.cuda.math_sdp_enabled())
                )
        x = torch.randn(1, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
        cond = torch.randn(1, cfg.text_max_length, cfg.cross_attention_dim)
        unet(x, torch.tensor([10]), encoder_hidden_states=cond)
        assert seen and set(seen) == math_enabled


@pytest.mark.parametrize(
    "bench, path",
    [(b, p) for b in FIELDS for p in sorted(benchmarks.get(b).configs_dir.glob("*.yaml"))],
    ids=lambda x: x.name if isinstance(x, Path) else x,
)
def test_every_shipped_config_resolves(bench, path):
    """Each tuned config resolves on its system (switches included); tiny.yaml on cpu-local."""
    size = load_yaml(path).get("size", "full")
    system = "cpu-local" if path.stem == "tiny" else path.stem
    plan = resolve_runs(benchmarks.get(bench), system, size=size, runs=1, seed=1).plans[0]
    assert plan.size == size
