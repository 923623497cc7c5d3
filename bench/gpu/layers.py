"""Full-width layers on one GPU: a GPT-3 175B decoder layer, a Llama 3.1 8B decoder layer, a
gpt-oss-20b MoE layer, FLUX.1 blocks and a Llama 2 70B LoRA decoder layer.

GPT-3 (hidden 12288, 96 heads, FFN 49152, sequence 2048, micro-batch 1, TP=1), forward + backward:
- megatron-core `TransformerBlock` of one layer built by the benchmark's own code
  (reference_impls/megatron_gpt/model.py: `transformer_config` and `layer_spec`): the Transformer Engine spec
  when TE imports (and then FP8 through TE: hybrid e4m3/e5m2, delayed scaling, amax history 1024, as
  the fp8 switch sets it), else megatron's local spec;
- the same shapes in plain PyTorch (LayerNorm, fused QKV, SDPA causal attention, GELU MLP), in bf16
  and with its linears in FP8 through `torch._scaled_mm` (fp8.py): the FP8 figure where TE is missing.
Llama 3.1 8B (hidden 4096, 32/8 heads, SwiGLU 14336, sequence 8192, micro-batch 1, TP=1), forward +
backward in bf16: megatron-core `TransformerBlock` of one layer with llama31_8b's provider
(reference_impls/megatron_gpt/llama31.py: RMSNorm, SwiGLU, GQA, RoPE with the 3.1 scaling), the TE
spec where TE imports (and FP8 through it), else the local spec.
FLUX.1 (flux1): one double-stream and one single-stream block of diffusers' FluxTransformer2DModel
at the reference's shapes (24 heads x 128 = 3072 wide; 256 image tokens, a 256-pixel image's 32 x 32
latents packed 2 x 2, and T5's 256 text tokens; the joint RoPE over (0, row, col) ids), micro-batch
16, bf16, forward + backward.
Llama 2 70B LoRA (hidden 8192, 64/8 heads, FFN 28672, sequence 8192, micro-batch 1): one decoder layer
of the benchmark's model (fused QKV + peft LoRA r16 on qkv_proj/o_proj, SDPA), forward + backward,
in bf16, in FP8 through torchao (the benchmark's fp8 switch) when torchao imports, and with its frozen
base linears in FP8 through `torch._scaled_mm`.
gpt-oss-20b (gpt_oss_20b): one MoE layer with the benchmark's provider (megatron_gpt/gpt_oss.py:
router, 32 SwiGLU experts of width 2880 top-4, the all-to-all dispatcher on one rank, GQA 64/8 heads
of width 64, RoPE), sequence 8192, micro-batch 1, bf16, forward + backward; FLOPs of the active
path (4 of the 32 experts).
DeepSeek-V3 (deepseekv3_671b): one MoE layer with the benchmark's provider (megatron_gpt/deepseek.py:
MLA at full width, the sigmoid router with expert bias and 8 groups, all 256 experts of width 2048
top-8 and the shared expert on one rank, which does the routed work of one EP 64 rank), sequence
4096, micro-batch 1, bf16; FLOPs of the active path (8 of 256 experts + the shared one).
Each row names its `path`; a row whose library is missing is `skipped` with the reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

import benchmarks
from bench.gpu import flops
from bench.gpu.fp8 import swap_linears
from bench.gpu.report import Check
from bench.gpu.timing import peak_memory_gib, reset_memory, time_steps

# Toy widths for the CPU smoke test (CI): the same code, sizes a 2-core CPU steps in milliseconds.
GPT3_TOY = dict(hidden_size=64, num_attention_heads=4, ffn_hidden_size=256, max_sequence_length=32)
LLAMA31_TOY = dict(
    hidden_size=64, num_attention_heads=4, num_query_groups=2, ffn_hidden_size=176, max_sequence_length=32
)
GPT_OSS_TOY = dict(
    hidden_size=64,
    num_attention_heads=8,
    num_query_groups=2,
    kv_channels=16,
    num_moe_experts=8,
    moe_router_topk=2,
    moe_ffn_hidden_size=64,
    window_size=16,
    max_sequence_length=32,
)
DEEPSEEK_TOY = dict(
    hidden_size=64,
    num_attention_heads=4,
    q_lora_rank=32,
    kv_lora_rank=16,
    qk_head_dim=16,
    qk_pos_emb_head_dim=8,
    v_head_dim=16,
    num_moe_experts=8,
    moe_router_topk=2,
    moe_router_num_groups=4,
    moe_router_group_topk=2,
    moe_ffn_hidden_size=32,
    moe_shared_expert_intermediate_size=32,
    max_sequence_length=32,
)
LLAMA_TOY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,
    max_sequence_length=32,
)


def importable(module: str) -> str | None:
    """None if `module` imports, else the one-line reason (TE can be installed and still broken)."""
    try:
        __import__(module)
    except Exception as e:  # ImportError, or a broken install's OSError/RuntimeError
        return f"{module} does not import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return None


def _one_rank(cfg):
    """The config's layout on one rank (TP = PP = CP = DP = 1), through the harness's one derivation."""
    from harness.core.layout import derive

    return derive(cfg, nodes=1, procs_per_node=1, num_layers=cfg.num_layers)


@contextlib.contextmanager
def megatron_world(device: str, layout):
    """A one-rank process group and megatron's parallel state (TP = PP = 1), torn down after."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from harness.train.runtime import init_one_process_group
    from reference_impls.megatron_gpt import train

    created = not dist.is_initialized()
    if created:
        init_one_process_group("nccl" if device.startswith("cuda") else "gloo")
    train.init_parallel(layout, seed=0)  # enables the CPU layer only when CUDA is absent
    try:
        yield
    finally:
        if ps.model_parallel_is_initialized():
            ps.destroy_model_parallel()
        if created:
            dist.destroy_process_group()


def gpt3_config(smoke: bool, fp8: bool = False):
    from benchmarks.gpt3.config import Gpt3Config

    return Gpt3Config(
        num_layers=1,
        global_batch_size=1536,
        micro_batch_size=2 if smoke else 1,
        precision="bf16",
        fp8=fp8,
        **(GPT3_TOY if smoke else {}),
    )


def llama31_config(smoke: bool, fp8: bool = False):
    from benchmarks.llama31_8b.config import Llama31Config

    return Llama31Config(
        num_layers=1,
        global_batch_size=32,
        micro_batch_size=1,
        precision="bf16",
        fp8=fp8,
        **(LLAMA31_TOY if smoke else {}),
    )


def gpt_oss_config(smoke: bool):
    """One gpt-oss-20b MoE layer as the dgx configs run it: 32 experts top-4 on one rank (EP 1),
    sequence 8192, MBS 1 (the tokens a rank's microbatch routes), bf16."""
    from benchmarks.gpt_oss_20b.config import GptOssConfig

    return GptOssConfig(
        num_layers=1,
        global_batch_size=32,
        micro_batch_size=1,
        precision="bf16",
        **(GPT_OSS_TOY if smoke else {}),
    )


def deepseek_config(smoke: bool):
    """One DeepSeek-V3 MoE layer (the 4th of 61: a MoE layer, no MTP), sequence 4096, MBS 1, bf16:
    the dgx-b200x32 config's microbatch. Its 256 experts on one rank route 4096 x 8 tokens, what an
    EP 64 rank's 4 experts receive from the group on average."""
    from benchmarks.deepseekv3_671b.config import DeepseekV3Config

    return DeepseekV3Config(
        num_layers=1,
        moe_first_dense_layers=0,
        mtp_num_layers=0,
        pipeline_split_counts_embedding_and_loss=False,
        global_batch_size=15360,
        micro_batch_size=1,
        precision="bf16",
        **(DEEPSEEK_TOY if smoke else {}),
    )


FLUX_TOY = dict(heads=4, head_dim=16, axes=(4, 6, 6), image_side=4, text=8, batch=2)
FLUX_FULL = dict(heads=24, head_dim=128, axes=(16, 56, 56), image_side=16, text=256, batch=16)
"""The reference's block shapes (diffusers defaults = FLUX.1-schnell: axes_dims_rope (16, 56, 56));
the image side is in packed tokens: 256-pixel images -> 32 x 32 latents -> 16 x 16 tokens."""


def _flux_block(ctx, single: bool) -> dict:
    from diffusers.models.transformers.transformer_flux import (
        FluxPosEmbed,
        FluxSingleTransformerBlock,
        FluxTransformerBlock,
    )

    f = FLUX_TOY if ctx.smoke else FLUX_FULL
    d, side, m, b = f["heads"] * f["head_dim"], f["image_side"], f["text"], f["batch"]
    kind = FluxSingleTransformerBlock if single else FluxTransformerBlock
    dtype = torch.bfloat16
    reset_memory(ctx.device)
    block = kind(d, f["heads"], f["head_dim"]).to(ctx.device, dtype)
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    image_ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3)
    ids = torch.cat([torch.zeros(m, 3, dtype=image_ids.dtype), image_ids]).to(ctx.device)
    rope = FluxPosEmbed(theta=10000, axes_dim=list(f["axes"]))(ids)
    x = torch.randn(b, side * side, d, device=ctx.device, dtype=dtype, requires_grad=True)
    c = torch.randn(b, m, d, device=ctx.device, dtype=dtype, requires_grad=True)
    temb = torch.randn(b, d, device=ctx.device, dtype=dtype, requires_grad=True)  # the timestep's, trained
    params = list(block.parameters())

    def step():
        enc, hid = block(x, c, temb, image_rotary_emb=rope)
        torch.autograd.backward([enc, hid], [torch.ones_like(enc), torch.ones_like(hid)])
        for t in (*params, x, c, temb):
            t.grad = None

    timing = time_steps(step, ctx.device, ctx.warmup, ctx.iters)
    flop = flops.flux_block_flops(b, side * side + m, d, single)
    return _figures(ctx, flop, timing, b * (side * side + m), "bf16")


def _figures(ctx, flop: float, timing: dict, tokens: int, peak_key: str) -> dict:
    """MFU against the peak of the precision measured; FP8 rows also against the bf16 peak, the
    convention of published MFU figures (so the two rows compare directly)."""
    peak = ctx.peaks.get(peak_key)
    out = {
        **timing,
        "flops_per_step": flop,
        "tflops": flop / timing["step_s"] / 1e12,
        "mfu": flops.mfu(flop, timing["step_s"], peak),
        "mfu_peak": peak_key if peak else None,
        "tokens_per_s": tokens / timing["step_s"],
        "peak_mem_gib": peak_memory_gib(ctx.device),
    }
    if peak_key == "fp8":
        out["mfu_vs_bf16_peak"] = flops.mfu(flop, timing["step_s"], ctx.peaks.get("bf16"))
    return out


def _mcore_layer(ctx, cfg, flop: float, fp8: bool) -> dict:
    """One decoder layer of the Megatron-GPT family (the config's model provider), forward + backward."""
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_block import TransformerBlock

    from reference_impls.megatron_gpt import model as gm

    s, b, h = cfg.max_sequence_length, cfg.micro_batch_size, cfg.hidden_size
    layout = _one_rank(cfg)
    with megatron_world(ctx.device, layout):
        reset_memory(ctx.device)
        tcfg = gm.transformer_config(cfg, layout, ctx.device)
        block = TransformerBlock(tcfg, gm.layer_spec(cfg, ctx.device, tcfg), post_process=False)
        block.to(ctx.device)
        if tcfg.bf16:  # as gm.build wraps each chunk: params_dtype misses the local spec's torch norms
            block = Float16Module(tcfg, block)
        dtypes = {p.dtype for p in block.parameters()}
        if dtypes != {tcfg.params_dtype}:  # a CPU layer_norm takes mixed dtypes; CUDA's does not
            raise RuntimeError(f"layer parameters in {sorted(map(str, dtypes))}, not {tcfg.params_dtype}")
        x = torch.randn(s, b, h, device=ctx.device, dtype=tcfg.params_dtype, requires_grad=True)
        grad = torch.randn_like(x)
        params = list(block.parameters())
        kw = {"fp32_output": False} if tcfg.bf16 else {}
        rope = gm.provider(cfg).model_fields(cfg)
        mla = tcfg.multi_latent_attention  # MLA makes its own (YaRN) rotary embedding, as in GPTModel
        if rope.get("position_embedding_type") == "rope" and not mla:  # GPTModel makes these for its decoder
            from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

            emb = RotaryEmbedding(
                kv_channels=tcfg.kv_channels,
                rotary_percent=1.0,
                rotary_base=rope["rotary_base"],
                rope_scaling=rope.get("rope_scaling", False),
                rope_scaling_factor=rope.get("rope_scaling_factor", 8.0),
            )
            kw["rotary_pos_emb"] = emb(s).to(ctx.device)

        def step():
            out = block(x, attention_mask=None, **kw)
            out = out[0] if isinstance(out, tuple) else out
            out.backward(grad)
            for p in params:
                p.grad = None
            x.grad = None

        timing = time_steps(step, ctx.device, ctx.warmup, ctx.iters)
        return _figures(ctx, flop, timing, b * s, "fp8" if fp8 else "bf16")


def _mcore_gpt3(ctx, fp8: bool) -> dict:
    cfg = gpt3_config(ctx.smoke, fp8)
    flop = flops.gpt_layer_flops(
        cfg.micro_batch_size, cfg.max_sequence_length, cfg.hidden_size, cfg.ffn_hidden_size
    )
    return _mcore_layer(ctx, cfg, flop, fp8)


def _mcore_llama31(ctx, fp8: bool) -> dict:
    from benchmarks.llama31_8b.cost import layer_fwd_flops

    cfg = llama31_config(ctx.smoke, fp8)
    return _mcore_layer(ctx, cfg, 3.0 * cfg.micro_batch_size * layer_fwd_flops(cfg), fp8)


def _mcore_gpt_oss(ctx) -> dict:
    """One MoE layer (router, the all-to-all dispatcher on one rank, 32 SwiGLU experts one GEMM
    each: moe_grouped_gemm ships off), its FLOPs the active path's (4 of 32 experts)."""
    cfg = gpt_oss_config(ctx.smoke)
    cost = benchmarks.get("gpt_oss_20b").cost
    s = cfg.max_sequence_length
    layer = cost.fwd_flops(cfg) - s * 2 * cfg.vocab_size * cfg.hidden_size  # without the logits
    return _mcore_layer(ctx, cfg, 3.0 * cfg.micro_batch_size * layer, False)


def _mcore_deepseek(ctx) -> dict:
    """One DeepSeek-V3 MoE layer (MLA, router, the all-to-all dispatcher on one rank, 256 SwiGLU
    experts one GEMM each: moe_grouped_gemm ships off), its FLOPs the active path's."""
    cfg = deepseek_config(ctx.smoke)
    cost = benchmarks.get("deepseekv3_671b").cost
    s = cfg.max_sequence_length
    layer = cost.fwd_flops(cfg) - s * 2 * cfg.vocab_size * cfg.hidden_size  # without the logits
    return _mcore_layer(ctx, cfg, 3.0 * cfg.micro_batch_size * layer, False)


class TorchGptLayer(nn.Module):
    """GPT-3's decoder layer in plain PyTorch: pre-LN, fused QKV with biases, causal SDPA, GELU MLP."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):  # [b, s, h]
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _torch_gpt3(ctx, fp8: bool) -> dict:

    cfg = gpt3_config(ctx.smoke)
    s, b, h = cfg.max_sequence_length, cfg.micro_batch_size, cfg.hidden_size
    reset_memory(ctx.device)
    with torch.device(ctx.device):
        layer = TorchGptLayer(h, cfg.num_attention_heads, cfg.ffn_hidden_size).to(torch.bfloat16)
    if fp8:
        swap_linears(layer)
    x = torch.randn(b, s, h, device=ctx.device, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def step():
        layer(x).backward(grad)
        layer.zero_grad(set_to_none=True)
        x.grad = None

    timing = time_steps(step, ctx.device, ctx.warmup, ctx.iters)
    flop = flops.gpt_layer_flops(b, s, h, cfg.ffn_hidden_size)
    return _figures(ctx, flop, timing, b * s, "fp8" if fp8 else "bf16")


def _lora(ctx, fp8: str | None, compiled: bool = False) -> dict:
    """fp8: None (bf16), 'torchao' (the benchmark's convert_fp8) or 'scaled_mm' (fp8.py); `compiled`:
    the layer compiled as the benchmark's `compile` switch does (`layer.compile()` after LoRA).
    torchao's float8 is meant to run compiled: eager, its scaling is many small kernels, and the
    fp8 switch measured 1.9x slower than bf16 on the H200 (2026-12-04); these rows say whether
    fp8 + compile beats bf16 + compile before a shipped config keeps both on."""
    from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
    from reference_impls.llama2_70b_lora import model as M

    cfg = Llama2LoraConfig(num_layers=1, precision="bf16", fp8=bool(fp8), **(LLAMA_TOY if ctx.smoke else {}))
    b, s = cfg.micro_batch_size, cfg.max_sequence_length
    reset_memory(ctx.device)
    torch.manual_seed(0)
    base = M.build_base(cfg, ctx.device).to(torch.bfloat16)
    M.reset_rope(base, ctx.device)
    if fp8 == "torchao":
        M.convert_fp8(base)
    elif fp8 == "scaled_mm":
        swap_linears(base.model.layers)
    model = M.apply_lora(base, cfg)
    model.train()
    inner = model.base_model.model.model  # peft -> LlamaForCausalLM -> LlamaModel
    layer = inner.layers[0]
    if compiled:
        layer.compile()
    x = torch.randn(b, s, cfg.hidden_size, device=ctx.device, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(s, device=ctx.device).unsqueeze(0).expand(b, s)
    rope = inner.rotary_emb(x, pos)
    grad = torch.randn_like(x)

    def step():
        out = layer(x, position_embeddings=rope, attention_mask=None)
        (out[0] if isinstance(out, tuple) else out).backward(grad)
        model.zero_grad(set_to_none=True)
        x.grad = None

    timing = time_steps(step, ctx.device, ctx.warmup, ctx.iters)
    width = cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads)
    flop = flops.linear_flops(layer, b * s) + flops.attention_flops(b, s, width)
    out = _figures(ctx, flop, timing, b * s, "fp8" if fp8 else "bf16")
    out["trainable_params"] = sum(p.numel() for p in layer.parameters() if p.requires_grad)
    return out


def checks(ctx) -> Iterator[Check]:
    """Every layer row, one at a time as it is measured: (name, path, function or why it cannot run)."""
    cuda = ctx.device.startswith("cuda")
    no_mcore = importable("megatron.core")
    no_te = importable("transformer_engine.pytorch") if cuda else "Transformer Engine needs CUDA"
    no_ao = importable("torchao.float8") if cuda else "torchao float8 needs CUDA"
    # inductor on a CPU compiles C++ for ~20 s even for the smoke test's toy layer (measured): GPU only here
    no_compile = (
        None
        if cuda
        else "torch.compile rows run on the GPU only (CPU inductor: ~20 s to compile the toy layer)"
    )
    spec = "TE spec" if not no_te else "local spec (no Transformer Engine)"
    rows = [
        (
            "gpt3_layer/mcore/bf16",
            f"megatron-core TransformerBlock, {spec}",
            no_mcore,
            lambda: _mcore_gpt3(ctx, False),
        ),
        (
            "gpt3_layer/mcore-te/fp8",
            "megatron-core TransformerBlock, TE spec, FP8 hybrid (delayed scaling)",
            no_mcore or no_te,
            lambda: _mcore_gpt3(ctx, True),
        ),
        ("gpt3_layer/torch/bf16", "plain PyTorch, same shapes (SDPA)", None, lambda: _torch_gpt3(ctx, False)),
        (
            "gpt_oss_layer/mcore/bf16",
            f"megatron-core TransformerBlock, gpt_oss_20b's provider (one MoE layer, 32 experts top-4), {spec}",
            no_mcore,
            lambda: _mcore_gpt_oss(ctx),
        ),
        (
            "deepseek_layer/mcore/bf16",
            f"megatron-core TransformerBlock, deepseekv3_671b's provider (MLA, 256 experts top-8 + shared), {spec}",
            no_mcore,
            lambda: _mcore_deepseek(ctx),
        ),
        (
            "llama31_layer/mcore/bf16",
            f"megatron-core TransformerBlock, llama31_8b's provider, {spec}",
            no_mcore,
            lambda: _mcore_llama31(ctx, False),
        ),
        (
            "llama31_layer/mcore-te/fp8",
            "megatron-core TransformerBlock, llama31_8b's provider, TE spec, FP8 hybrid",
            no_mcore or no_te,
            lambda: _mcore_llama31(ctx, True),
        ),
        (
            "gpt3_layer/torch-scaled_mm/fp8",
            "plain PyTorch, same shapes, linears in FP8 via torch._scaled_mm",
            None,
            lambda: _torch_gpt3(ctx, True),
        ),
        (
            "flux1_block/double/bf16",
            "diffusers FluxTransformerBlock (double stream), joint RoPE, SDPA",
            None,
            lambda: _flux_block(ctx, single=False),
        ),
        (
            "flux1_block/single/bf16",
            "diffusers FluxSingleTransformerBlock, joint RoPE, SDPA",
            None,
            lambda: _flux_block(ctx, single=True),
        ),
        (
            "llama2_lora_layer/bf16",
            "benchmark model (fused QKV + peft LoRA), SDPA",
            None,
            lambda: _lora(ctx, None),
        ),
        (
            "llama2_lora_layer/torchao/fp8",
            "benchmark model, frozen base linears in FP8 via torchao (the fp8 switch)",
            no_ao,
            lambda: _lora(ctx, "torchao"),
        ),
        (
            "llama2_lora_layer/compile/bf16",
            "benchmark model, the layer compiled as the compile switch does (inductor)",
            no_compile,
            lambda: _lora(ctx, None, compiled=True),
        ),
        (
            "llama2_lora_layer/torchao-compile/fp8",
            "benchmark model, torchao FP8 base linears, the layer compiled (fp8 + compile switches)",
            no_ao or no_compile,
            lambda: _lora(ctx, "torchao", compiled=True),
        ),
        (
            "llama2_lora_layer/torch-scaled_mm/fp8",
            "benchmark model, frozen base linears in FP8 via torch._scaled_mm",
            None,
            lambda: _lora(ctx, "scaled_mm"),
        ),
    ]
    for name, path, why, fn in rows:
        yield ctx.measure(name, "layer", path, fn, unavailable=why)
