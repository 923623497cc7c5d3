"""llama2_70b_lora: each FSDP rank reads only its shard of the safetensors base checkpoint.

The ranks are simulated in one process with torch's fake process group (no communication; the
FSDP2 sharding, the meta build and `to_empty` are the training's own: train.build's sharded branch).
Every byte that leaves the checkpoint goes through safetensors' `get_tensor` or a `get_slice`
index, so wrapping `safe_open` counts what a rank reads."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from benchmarks.llama2_70b_lora.config import Llama2LoraConfig

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop

REPO = Path(__file__).resolve().parents[2]
# Widths chosen so every sharded dim splits unevenly over 2 ranks somewhere (qkv rows 96 + 2 x 48
# = 192 even; vocab 67 and FFN 86 odd): the box arithmetic must match FSDP2's torch.chunk shards.
CFG = dict(
    num_layers=2,
    hidden_size=96,
    intermediate_size=86,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=67,
    max_sequence_length=16,
    precision="fp32",
    activation_checkpointing=False,
)


class _Counted:
    """safe_open that adds the bytes of every tensor it hands out to `read[0]`."""

    read = [0]

    def __init__(self, path, framework):
        self._h = safe_open(path, framework=framework)

    def keys(self):
        return self._h.keys()

    def get_tensor(self, name):
        t = self._h.get_tensor(name)
        self.read[0] += t.nbytes
        return t

    def get_slice(self, name):
        return _CountedSlice(self._h.get_slice(name), self.read)


class _CountedSlice:
    def __init__(self, sl, read):
        self._sl, self._read = sl, read

    def get_shape(self):
        return self._sl.get_shape()

    def __getitem__(self, index):
        t = self._sl[index]
        self._read[0] += t.nbytes
        return t


def _base_checkpoint(tmp_path, cfg, split_qkv: bool):
    """A base checkpoint in the HF layout (split q/k/v) or the MLCommons one (fused qkv_proj)."""
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    from reference_impls.llama2_70b_lora import checkpoint as C
    from reference_impls.llama2_70b_lora import model as M

    if split_qkv:
        tmp_path.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        ref = LlamaForCausalLM(M.llama_config(cfg))
        (tmp_path / "config.json").write_text(json.dumps(ref.config.to_dict(), default=str))
        sd = {k: v.contiguous() for k, v in ref.state_dict().items()}
        save_file(sd, str(tmp_path / "model.safetensors"))
        return sd
    ref = M.build_base(cfg, seed=0)
    C.save_base(ref, tmp_path)
    return {k: v.detach() for k, v in ref.state_dict().items()}


def _load_as_rank(rank: int, world: int, model_dir) -> tuple[int, dict]:
    """train.build's sharded path for one rank of `world` under a fake process group, counting the
    bytes the loader reads; (bytes read, {checkpoint name: local shard})."""
    import safetensors
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from reference_impls.llama2_70b_lora import checkpoint as C
    from reference_impls.llama2_70b_lora import model as M

    cfg = Llama2LoraConfig(**CFG)
    safetensors.safe_open = _Counted
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    mesh = init_device_mesh("cpu", (world,))
    model = M.apply_lora(M.build_base(cfg, "meta"), cfg)
    M.shard_fsdp(model, mesh, torch.float32)
    model.to_empty(device="cpu")
    C.load_base_weights(model, model_dir)
    shards = {C._ckpt_name(n): p.to_local() for n, p in model.named_parameters() if ".lora_" not in n}
    return _Counted.read[0], shards


def _rank_process(rank: int, world: int, dirs: list[Path]) -> list[tuple[int, dict]]:
    """_load_as_rank for each checkpoint dir, in a process of its own: in one process, a second fake
    process group gets the first one's mesh coordinate back from DTensor's dispatch caches (meshes
    compare equal across groups)."""
    out = dirs[0].parent / f"rank{rank}.pt"
    r = subprocess.run(
        [sys.executable, __file__, str(rank), str(world), str(out), *map(str, dirs)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return [(g["read"], g["shards"]) for g in torch.load(out, weights_only=True)]


def test_each_rank_reads_only_its_shard_of_the_checkpoint(tmp_path):
    """Both checkpoint layouts (MLCommons fused qkv_proj, HF split q/k/v), 2 simulated ranks."""
    from reference_impls.llama2_70b_lora.checkpoint import QKV

    cfg = Llama2LoraConfig(**CFG)
    dirs = [tmp_path / "fused", tmp_path / "split"]
    fulls = [_base_checkpoint(d, cfg, split_qkv=d.name == "split") for d in dirs]
    world = 2
    per_rank = [_rank_process(r, world, dirs) for r in range(world)]
    for i, full in enumerate(fulls):
        total = sum(t.nbytes for t in full.values())
        got = [rank[i] for rank in per_rank]
        for r, (read, shards) in enumerate(got):
            # FSDP2 shards every parameter on dim 0 (torch.chunk): nothing is replicated here, so a
            # rank reads half the checkpoint, the odd rows of uneven dims (vocab 67) on rank 0.
            assert read == sum(s.nbytes for s in shards.values()), (dirs[i].name, r, read)
            assert read == pytest.approx(total / world, rel=0.02), (dirs[i].name, r, read, total)
        # ... and what it read is its shard of the checkpoint's tensors (q/k/v fused as [q; k; v]).
        for name in got[0][1]:
            if name in full:
                whole = full[name]
            else:
                whole = torch.cat([full[name.replace(".qkv_proj.", f".{p}.")] for p in QKV])
            assert torch.equal(torch.cat([shards[name] for _, shards in got]), whole), name


if __name__ == "__main__":  # one simulated rank (_rank_process)
    rank, world, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    got = []
    for d in sys.argv[4:]:
        _Counted.read[0] = 0
        read, shards = _load_as_rank(rank, world, Path(d))
        got.append({"read": read, "shards": {k: v.clone() for k, v in shards.items()}})
        import torch.distributed as dist

        dist.destroy_process_group()
    torch.save(got, out)
