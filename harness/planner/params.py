"""Parameter counts and per-rank bytes of weights, gradients and optimizer state, exactly as the
harness's own implementations build and shard each model (torch-free: counted from the config).

    parameters(bench, cfg)                    -> {"total": N, "trainable": T}
    rank_bytes(bench, cfg, layout, device)    -> bytes per rank by part (the busiest rank)

What each implementation keeps per rank (reference_impls/<name>/):
  gpt3       megatron-core GPTModel (LayerNorm + biases, learned positions, tied embeddings; with PP
             the last stage holds its own copy of the word embedding for the output layer).
             Weights in bf16 on GPU (`precision: bf16`), fp32 on CPU; gradients in megatron's fp32
             grad buffer (`grad_reduce_in_fp32=True`), full size on every rank of the stage;
             optimizer: fp32 master copy (bf16 weights only) + Adam m and v, divided over DP x CP
             by the distributed optimizer.
  llama2_70b_lora  transformers Llama (fused qkv_proj, untied lm_head) + peft LoRA on
             `lora_target_modules`. Frozen base in `precision` (bf16), adapters fp32; with FSDP2
             (`fsdp`, world > 1) every tensor is split over all DP x CP ranks, gradients (fp32,
             adapters only) and AdamW m, v too; plus the current and the prefetched decoder layer
             gathered in bf16 (`fsdp_gathered`).
  gnn        PyG R-GAT: one GATConv per edge type per layer (those that cannot reach the seed
             papers are not built), a final Linear; fp32, DDP replicas, Adam m and v.
  stable_diffusion  diffusers UNet2DConditionModel (SD v2 layout); fp32 weights and gradients
             under AMP, AdamW m and v, split over all ranks by ZeroRedundancyOptimizer when
             `distributed_optimizer` is on.
Sharded sizes follow each sharder's own rule: megatron's buffers are divided over the group (padded
to a multiple of it: < 0.01 %); FSDP2 splits every tensor on dim 0 (rank 0 holds ceil(dim0 / world)
rows); ZeroRedundancyOptimizer hands out whole tensors, largest first (`zero_busiest`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

BF16, FP32 = 2, 4


def default_config(bench: str):
    """The benchmark's typed config at its defaults (the full-size reference; shapes only: fields
    without a default, such as gpt3's global batch, stay unset)."""
    import benchmarks

    return benchmarks.config_class(bench).model_construct()


def _layout(layout) -> dict:
    keys = ("tp", "pp", "vp", "cp", "dp")
    if layout is None:
        return dict.fromkeys(keys, 1)
    get = layout.get if isinstance(layout, Mapping) else lambda k, d=1: getattr(layout, k, d)
    return {k: int(get(k, 1) or 1) for k in keys}


# ---- gpt3 ---------------------------------------------------------------------------------------
def gpt3_layer(cfg, tp: int = 1) -> int:
    """One transformer layer on one TP rank: QKV and fc1 split by columns (weights and biases),
    proj and fc2 by rows (their biases and both LayerNorms replicated)."""
    h, f = cfg.hidden_size, cfg.ffn_hidden_size
    split = 3 * h * h + 3 * h + h * h + h * f + f + f * h
    return split // tp + 2 * h + 2 * h + h + h


def gpt3_stages(cfg, tp: int = 1, pp: int = 1) -> list[int]:
    """Parameters of one TP rank of each pipeline stage (all its virtual chunks together)."""
    shape = (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.vocab_size, cfg.max_sequence_length)
    return list(_gpt3_stages(shape, tp, pp))


@cache
def _gpt3_stages(shape: tuple, tp: int, pp: int) -> tuple[int, ...]:
    layers, h, f, vocab, seq = shape
    layer = (3 * h * h + 3 * h + h * h + h * f + f + f * h) // tp + 2 * h + 2 * h + h + h
    vocab = -(-vocab // tp)
    per_stage = [layers // pp * layer for _ in range(pp)]
    per_stage[0] += vocab * h + seq * h  # word + position embeddings
    per_stage[-1] += 2 * h  # final LayerNorm
    if pp > 1:  # output layer: the tied word embedding, copied to the last stage
        per_stage[-1] += vocab * h
    return tuple(per_stage)


def _gpt3_bytes(cfg, lay: dict, device: str) -> dict:
    stage = max(gpt3_stages(cfg, lay["tp"], lay["pp"]))
    half = device != "cpu" and cfg.precision == "bf16"
    shard = lay["dp"] * lay["cp"] if cfg.distributed_optimizer else 1
    opt = (FP32 if half else 0) + 2 * FP32  # master (bf16 weights only) + Adam m, v
    return {
        "parameters_rank": stage,
        "weights": stage * (BF16 if half else FP32),
        "gradients": stage * FP32,
        "optimizer": stage * opt / shard,
    }


# ---- llama2_70b_lora ----------------------------------------------------------------------------
def _llama2_layer(cfg) -> list[tuple[int, int, bool]]:
    """(dim 0, elements per dim-0 row, trainable) of every tensor of one decoder layer."""
    h, f = cfg.hidden_size, cfg.intermediate_size
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    linears = {"qkv_proj": (h + 2 * kv, h), "o_proj": (h, h), "gate_proj": (f, h), "up_proj": (f, h)}
    linears["down_proj"] = (h, f)  # (out, in): nn.Linear keeps weight as [out, in]
    r = cfg.lora_rank
    layer = [(o, i, False) for o, i in linears.values()] + [(h, 1, False)] * 2  # + two RMSNorms
    for name, (o, i) in linears.items():
        if name in cfg.lora_target_modules:  # peft: lora_A [r, in], lora_B [out, r]
            layer += [(r, i, True), (o, r, True)]
    return layer


def llama2_tensors(cfg) -> list[tuple[int, int, bool]]:
    """Every tensor of the model: embed_tokens, the decoder layers, the final norm, lm_head (untied)."""
    v, h = cfg.vocab_size, cfg.hidden_size
    return [(v, h, False)] + _llama2_layer(cfg) * cfg.num_layers + [(h, 1, False), (v, h, False)]


def llama2_counts(cfg) -> dict:
    """Parameters: the frozen base, the LoRA adapters, and one decoder layer's base (FSDP gathers it)."""
    tensors = llama2_tensors(cfg)
    base = sum(d0 * rest for d0, rest, trainable in tensors if not trainable)
    lora = sum(d0 * rest for d0, rest, trainable in tensors if trainable)
    layer = sum(d0 * rest for d0, rest, trainable in _llama2_layer(cfg) if not trainable)
    return {"base": base, "lora": lora, "layer": layer}


def _llama2_bytes(cfg, lay: dict, device: str) -> dict:
    n = llama2_counts(cfg)
    world = lay["dp"] * lay["cp"]
    shard = world if (cfg.fsdp and world > 1) else 1
    base_b = BF16 if cfg.precision == "bf16" else FP32
    # FSDP2 splits every tensor on dim 0 in chunks of ceil(dim0 / world): rank 0 holds the
    # largest share, a whole row of each LoRA A matrix [16, in] even when world > 16.
    held = [(-(-d0 // shard) * rest, t) for d0, rest, t in llama2_tensors(cfg)]
    base = sum(k for k, t in held if not t)
    lora = sum(k for k, t in held if t)
    out = {
        "parameters_rank": base + lora,
        "weights": base * base_b + lora * FP32,
        "gradients": lora * FP32,
        "optimizer": lora * 2 * FP32,
    }
    if shard > 1:  # FSDP2: the running layer and the prefetched next one, unsharded
        out["fsdp_gathered"] = 2 * n["layer"] * base_b
    return out


# ---- gnn ------------------------------------------------------------------------------------------
def gnn_convs(cfg) -> list[int]:
    """GATConvs built per layer (first layer first), walking back from the seed papers, as
    reference_impls/gnn/model.py builds them (one per edge type that can reach a seed paper)."""
    from benchmarks.gnn.config import IGBH_RELATIONS

    types = set(cfg.num_nodes)
    edges = []
    for s, r, d in IGBH_RELATIONS:
        if s in types and d in types:
            edges.append((s, d))
            if r != "cites":
                edges.append((d, s))
    per_layer, needed = [], {"paper"}
    for _ in range(cfg.num_layers):
        kept = [e for e in edges if e[1] in needed]
        per_layer.append(len(kept))
        needed = {e[0] for e in kept}
    return per_layer[::-1]


def gnn_count(cfg) -> int:
    hid = cfg.hidden_channels
    total = 0
    for i, n in enumerate(gnn_convs(cfg)):
        c_in = cfg.in_channels if i == 0 else hid
        total += n * (2 * c_in * hid + 3 * hid)  # lin_src, lin_dst; att_src, att_dst, bias
    return total + hid * cfg.num_classes + cfg.num_classes


def _gnn_bytes(cfg, lay: dict, device: str) -> dict:
    n = gnn_count(cfg)
    return {"parameters_rank": n, "weights": n * FP32, "gradients": n * FP32, "optimizer": n * 2 * FP32}


# ---- stable_diffusion ------------------------------------------------------------------------------
def _resnet(c_in: int, c_out: int, temb: int) -> list[int]:
    """ResnetBlock2D: norm1, conv1 (3x3), time_emb_proj, norm2, conv2 (3x3), 1x1 shortcut if needed."""
    out = [c_in, c_in, c_in * c_out * 9, c_out, temb * c_out, c_out, c_out, c_out, c_out * c_out * 9, c_out]
    return out + ([c_in * c_out, c_out] if c_in != c_out else [])


def _transformer(c: int, cross: int) -> list[int]:
    """Transformer2DModel with linear projections: GroupNorm, proj_in, one block, proj_out."""
    attn1 = [c * c] * 3 + [c * c, c]  # q, k, v without bias; out with bias
    attn2 = [c * c, cross * c, cross * c, c * c, c]
    ff = [8 * c * c, 8 * c, 4 * c * c, c]  # GEGLU projection to 2 x 4c, then 4c -> c
    block = [c] * 6 + attn1 + attn2 + ff  # three LayerNorms
    return [c, c, c * c, c] + block + [c * c, c]


def unet_tensors(cfg) -> list[int]:
    """Element counts of every UNet tensor (diffusers UNet2DConditionModel, SD v2 layout)."""
    ch = list(cfg.unet_block_out_channels)
    temb, cross, lpb, n = 4 * ch[0], cfg.cross_attention_dim, cfg.unet_layers_per_block, len(ch)
    out = [ch[0] * temb, temb, temb * temb, temb]  # time embedding MLP
    out += [cfg.latent_channels * ch[0] * 9, ch[0]]  # conv_in
    prev = ch[0]
    for i, c in enumerate(ch):  # down: cross-attention on every level but the last
        for j in range(lpb):
            out += _resnet(prev if j == 0 else c, c, temb)
            out += _transformer(c, cross) if i < n - 1 else []
        out += [c * c * 9, c] if i < n - 1 else []  # downsampler
        prev = c
    out += _resnet(ch[-1], ch[-1], temb) + _transformer(ch[-1], cross) + _resnet(ch[-1], ch[-1], temb)
    rev = ch[::-1]
    prev = rev[0]
    for i, c in enumerate(rev):  # up: lpb + 1 ResNets on the skip-concatenated input
        skip_in = rev[min(i + 1, n - 1)]
        for j in range(lpb + 1):
            res_in = prev if j == 0 else c
            out += _resnet(res_in + (skip_in if j == lpb else c), c, temb)
            out += _transformer(c, cross) if i > 0 else []
        out += [c * c * 9, c] if i < n - 1 else []  # upsampler
        prev = c
    return out + [ch[0], ch[0], ch[0] * cfg.latent_channels * 9, cfg.latent_channels]  # norm, conv_out


def unet_count(cfg) -> int:
    return sum(unet_tensors(cfg))


def zero_busiest(sizes: list[int], world: int) -> int:
    """Elements on the busiest rank under ZeroRedundancyOptimizer: whole tensors, largest first,
    each to the rank holding the fewest so far (torch's `_partition_parameters`)."""
    ranks = [0] * world
    for n in sorted(sizes, reverse=True):
        ranks[ranks.index(min(ranks))] += n
    return max(ranks)


def _sd_bytes(cfg, lay: dict, device: str) -> dict:
    sizes = unet_tensors(cfg)
    n = sum(sizes)
    world = lay["dp"] * lay["cp"] * lay["tp"] * lay["pp"]
    held = zero_busiest(sizes, world) if (cfg.distributed_optimizer and world > 1) else n
    return {
        "parameters_rank": n,
        "weights": n * FP32,
        "gradients": n * FP32,
        "optimizer": held * 2 * FP32,
    }


# ---- entry points --------------------------------------------------------------------------------
def parameters(bench: str, cfg=None) -> dict:
    """{'total': all parameters, 'trainable': those with gradients} of the model `cfg` builds."""
    cfg = cfg if cfg is not None else default_config(bench)
    if bench == "gpt3":
        n = sum(gpt3_stages(cfg)) - 0  # TP 1, PP 1: embeddings counted once (tied)
        return {"total": n, "trainable": n}
    if bench == "llama2_70b_lora":
        c = llama2_counts(cfg)
        return {"total": c["base"] + c["lora"], "trainable": c["lora"], "base": c["base"]}
    n = gnn_count(cfg) if bench == "gnn" else unet_count(cfg)
    return {"total": n, "trainable": n}


def rank_bytes(bench: str, cfg=None, layout=None, device: str = "cuda") -> dict:
    """Bytes per rank of the busiest rank by part: 'weights', 'gradients', 'optimizer' (and
    'fsdp_gathered' for sharded llama2), plus 'parameters_rank' (a count, not bytes). `cfg` is the
    benchmark's typed config (default: full size), `layout` anything with tp/pp/vp/cp/dp (a
    harness Layout, a dict; missing degrees are 1), `device` 'cuda' or 'cpu' (dtypes differ)."""
    cfg = cfg if cfg is not None else default_config(bench)
    fn = {"gpt3": _gpt3_bytes, "llama2_70b_lora": _llama2_bytes, "gnn": _gnn_bytes}.get(bench, _sd_bytes)
    return fn(cfg, _layout(layout), device)
