"""Context parallelism (CP): Llama 3's all-gather scheme, one code path for CPU (gloo) and GPU (NCCL).

Each sequence of S tokens is cut into 2·CP chunks; CP rank r holds chunks r and 2·CP−1−r, so
every rank has the same causal-attention work (an early chunk with few keys, a late one with
many). A rank embeds, projects and scores only its own tokens: Q, K, V for them, RoPE at their
GLOBAL positions (the position ids passed to the model). In every attention layer K and V are
all-gathered over the CP group (`_Gather`: its backward is a reduce-scatter, the sum of every
rank's gradient back to the rank that owns the tokens), put back in global token order, and
attended to under an explicit mask (query at global position p sees keys at positions <= p).
The 4-D mask is passed as the model's `attention_mask`: transformers returns a 4-D mask as it is,
so it neither builds its own causal mask nor reads the jump in the position ids (rank 0 of CP 2
holds positions 0..c-1 then 3c..4c-1) as two packed sequences.

Why not torch's ring attention (torch.distributed.tensor.experimental._context_parallel): it
shards only the CUDA SDPA kernels, so a CPU could not run the path a GPU would. The all-gather
costs K/V memory of the whole sequence per layer (GQA: 8 of 64 heads at 70B), as in Llama 3.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class _Gather(torch.autograd.Function):
    """All-gather along dim 0 over `group`; backward: reduce-scatter (sum) of the gathered grads."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        x = x.contiguous()
        out = x.new_empty((dist.get_world_size(group) * x.shape[0], *x.shape[1:]))
        dist.all_gather_into_tensor(out, x, group=group)
        return out

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        (grad,) = grads
        n = dist.get_world_size(ctx.group)
        out = grad.new_empty((grad.shape[0] // n, *grad.shape[1:]))
        dist.reduce_scatter_tensor(out, grad.contiguous(), group=ctx.group)
        return out, None


class ContextParallel:
    """One rank's place in its CP group: which tokens it holds, and the K/V all-gather."""

    def __init__(self, group, rank: int, size: int):
        self.group, self.rank, self.size = group, rank, size
        self._index: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _tables(self, seq_len: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(this rank's global positions, the gathered rows in global order, the causal mask)."""
        key = (seq_len, str(device))
        if key not in self._index:
            n = 2 * self.size
            if seq_len % n:  # the config's validator refuses it first
                raise ValueError(f"sequence length {seq_len} is not divisible by 2 x CP = {n}")
            c = seq_len // n

            def held(r: int) -> torch.Tensor:
                return torch.cat(
                    [torch.arange(r * c, (r + 1) * c), torch.arange((n - 1 - r) * c, (n - r) * c)]
                )

            mine = held(self.rank)
            # Row j of the gathered K/V is rank j // (2c)'s token; argsort puts position p at row p.
            order = torch.argsort(torch.cat([held(r) for r in range(self.size)]))
            mask = torch.arange(seq_len)[None, :] <= mine[:, None]  # [local queries, all keys]
            self._index[key] = (mine.to(device), order.to(device), mask[None, None].to(device))
        return self._index[key]

    def positions(self, seq_len: int, device) -> torch.Tensor:
        return self._tables(seq_len, device)[0]

    def mask(self, seq_len: int, device) -> torch.Tensor:
        """[1, 1, S / CP, S] bool, True = attend (SDPA's boolean attn_mask)."""
        return self._tables(seq_len, device)[2]

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """[B, H, S / CP, D] of this rank's tokens -> [B, H, S, D] of all tokens, global order."""
        local = t.shape[2]
        order = self._tables(local * self.size, t.device)[1]
        whole = _Gather.apply(t.permute(2, 0, 1, 3), self.group)
        return whole.index_select(0, order).permute(1, 2, 0, 3)

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """In place all-reduce (sum) over the CP group; for tensors outside autograd (counts, eval)."""
        dist.all_reduce(t, group=self.group)
        return t
