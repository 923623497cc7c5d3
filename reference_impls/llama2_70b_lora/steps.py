"""One training step and one evaluation, as train.run calls them (and the CP equality test's worker).

Losses are sums of answer-token cross entropy and answer-token counts. Without CP a rank holds
whole sequences; with CP (context_parallel.py) it holds 2 of the 2·CP chunks of each, scores its
own tokens, and the counts (training) or both sums (evaluation) are summed over the CP group, so
the loss is the same token mean as at CP 1.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from reference_impls.llama2_70b_lora import data


def token_losses(model, ids, labels, cp=None):
    """Per-sequence (sum of answer-token CE, answer-token count) over the tokens this rank holds;
    labels already shifted on the whole sequence (data.shift_labels), so the label of a CP chunk's
    last token is the next chunk's first token. Training sums both over the micro-batch,
    evaluation weighs each sequence."""
    if cp is None:
        pos = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        logits = model(input_ids=ids, position_ids=pos).logits
    else:
        seq = ids.shape[1]
        pos = cp.positions(seq, ids.device)
        ids, labels = ids[:, pos], labels[:, pos]
        # A 4-D mask is used as it is: transformers builds none (and detects no packing).
        mask = cp.mask(seq, ids.device)
        logits = model(input_ids=ids, position_ids=pos.expand_as(ids), attention_mask=mask).logits
    ce = F.cross_entropy(
        logits.float().flatten(0, 1), labels.flatten(), ignore_index=data.IGNORE, reduction="none"
    ).view(labels.shape)
    mask = labels != data.IGNORE
    return (ce * mask).sum(1), mask.sum(1)


def _all_reduce(t: torch.Tensor, group=None) -> torch.Tensor:
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(t, group=group)
    return t


def train_step(model, batches, params, opt, cfg, lr: float, ga: int, cp=None):
    """Forward/backward over this rank's micro-batches, clip, AdamW. Returns (the loss: token mean
    per micro-batch / GA, summed; the gradient norm before clipping), tensors: no host sync."""
    loss_sum = torch.zeros((), device=batches[0][0].device)
    for ids, labels in batches:
        s, n = (x.sum() for x in token_losses(model, ids, labels, cp))
        if cp is not None:
            cp.sum(n)  # the micro-batch's token count over the whole sequences
        loss = s / n.clamp(min=1) / ga
        if cp is None:
            loss.backward()
        else:
            # FSDP averages gradients over all DP x CP ranks, and the CP ranks' losses add up to one
            # micro-batch's: x CP makes the average the mean over DP of whole micro-batches, as at CP 1.
            (loss * cp.size).backward()
        loss_sum += loss.detach()
    norm = torch.nn.utils.clip_grad_norm_(params, cfg.opt_gradient_clip_norm)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    opt.zero_grad(set_to_none=True)
    if cp is not None:
        cp.sum(loss_sum)  # the CP group's parts of the loss
    return loss_sum, norm


def evaluate(model, ev_ids, ev_labels, mesh, cfg, device) -> float:
    """Mean over eval sequences of the per-sequence mean answer-token loss (as the reference's
    Trainer with eval batch 1); DP ranks split the rows, the CP ranks of a DP group share them."""
    model.eval()
    cp = getattr(mesh, "cp", None)
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of per-seq means, seqs)
    rows = torch.arange(mesh.dp_rank, ev_ids.shape[0], mesh.dp)
    # Every rank must run the same number of forwards (FSDP all-gathers in each): ranks short of a
    # row repeat row 0 and give it weight 0.
    per_rank = -(-ev_ids.shape[0] // mesh.dp)
    weight = torch.ones(per_rank, dtype=torch.float64)
    if len(rows) < per_rank:
        weight[len(rows) :] = 0
        rows = torch.cat([rows, rows.new_zeros(per_rank - len(rows))])
    mb = cfg.eval_micro_batch_size
    with torch.no_grad():
        for i in range(0, per_rank, mb):
            r, w = rows[i : i + mb], weight[i : i + mb].to(device)
            s, n = token_losses(model, ev_ids[r].to(device), ev_labels[r].to(device), cp)
            if cp is not None:  # each sequence's sums over its chunks
                s, n = cp.sum(s), cp.sum(n)
            w = w * (n > 0)
            total[0] += (w * s.double() / n.double().clamp(min=1)).sum()
            total[1] += w.sum()
    _all_reduce(total, mesh.dp_group)  # over DP only: the CP ranks of a group hold the same total
    model.train()
    return (total[0] / total[1]).item()
