"""The reference's validation loss: validation sample j at t = timestep_j / 8 (timestep_j = j mod 8,
stored with the row), the velocity MSE per sample, and the metric = the mean over the 8 timesteps of
each timestep's mean (= the plain mean when every timestep has as many samples: 3,712 of 29,696).
Each row's posterior draw and noise come from its own generator (eval_seed, row; model.draws): the
same for every evaluation, run and layout. Ranks take every world-th row; all run the same number of forwards
(FSDP gathers parameters in each), a rank short of rows repeating row 0 at weight 0.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from reference_impls.flux1 import model as M


class Validation:
    def __init__(self, cfg, split, rt, shift: float, scale: float):
        self.cfg, self.split, self.rt, self.shift, self.scale = cfg, split, rt, shift, scale
        rows = list(range(rt.rank, cfg.eval_samples, rt.world_size))
        per_rank = -(-cfg.eval_samples // rt.world_size)
        self.weight = [1.0] * len(rows) + [0.0] * (per_rank - len(rows))
        self.rows = rows + [0] * (per_rank - len(rows))
        dev = torch.device(rt.device)
        self.img_ids, self.txt_ids = M.image_ids(cfg.latent_size, dev), M.text_ids(cfg.text_max_length, dev)

    @torch.no_grad()
    def __call__(self, model) -> float:
        cfg, dev = self.cfg, torch.device(self.rt.device)
        steps = cfg.eval_timesteps
        sums = torch.zeros(2, steps, dtype=torch.float64, device=dev)  # (loss sum, samples) per timestep
        model.eval()
        for i in range(0, len(self.rows), cfg.eval_batch_size):
            rows = self.rows[i : i + cfg.eval_batch_size]
            w = torch.tensor(self.weight[i : i + cfg.eval_batch_size], dtype=torch.float64, device=dev)
            b = {k: v.to(dev) for k, v in self.split.batch(rows).items()}
            eps, noise, _ = M.draws(cfg.eval_seed, rows, tuple(b["mean"].shape[1:]), evaluation=True)
            x0 = M.latents(b["mean"], b["logvar"], eps.to(dev), self.shift, self.scale)
            noise = M.pack(noise.to(dev))
            ts = b["timestep"].long()  # 0 .. steps - 1: data.splits checked
            t = ts.float() / steps
            with M.autocast(cfg, self.rt.device):
                pred, velocity = M.flow(
                    model, x0, noise, t, b["t5_encodings"], b["clip_encodings"], self.img_ids, self.txt_ids
                )
            mse = ((pred - velocity) ** 2).mean(dim=(1, 2)).double()
            sums[0].index_add_(0, ts, mse * w)
            sums[1].index_add_(0, ts, w)
        model.train()
        if self.rt.world_size > 1:
            dist.all_reduce(sums)
        seen = sums[1] > 0  # a timestep without samples (eval_samples < 8) is not averaged in
        return float((sums[0][seen] / sums[1][seen]).mean())
