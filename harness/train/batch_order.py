"""The deterministic order of training rows, shared by the loops that index a dataset by row
(llama2_70b_lora, flux1): a pure function of (seed, step), so a resumed run continues the data
order by its step alone and a rank's share does not depend on how the others read."""

from __future__ import annotations

import torch


class BatchOrder:
    """Deterministic epoch-wise shuffle of `n` rows: step s takes rows [s*GBS, (s+1)*GBS) of the
    concatenated permutations; DP rank r takes its contiguous slice of each global batch."""

    def __init__(self, n: int, global_batch: int, seed: int):
        self.n, self.gbs, self.seed = n, global_batch, seed
        self._perms: dict[int, torch.Tensor] = {}

    def _perm(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perms:
            g = torch.Generator().manual_seed(self.seed * 1000 + epoch)
            self._perms = {e: p for e, p in self._perms.items() if e >= epoch - 1}
            self._perms[epoch] = torch.randperm(self.n, generator=g)
        return self._perms[epoch]

    def global_batch(self, step: int) -> torch.Tensor:
        start, parts = step * self.gbs, []
        while len(parts) == 0 or sum(len(p) for p in parts) < self.gbs:
            pos = start + sum(len(p) for p in parts)
            epoch, off = divmod(pos, self.n)
            parts.append(self._perm(epoch)[off : off + self.gbs - sum(len(p) for p in parts)])
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def rank_batch(self, step: int, dp_rank: int, dp_size: int) -> torch.Tensor:
        per = self.gbs // dp_size
        return self.global_batch(step)[dp_rank * per : (dp_rank + 1) * per]
