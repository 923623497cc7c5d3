"""`python -m reference_impls.llama2_70b_lora.prepare --plan PLAN.json`

Tiny: build everything the full benchmark gets from MLCommons, deterministically and offline:
  1. a synthetic corpus ("language"): 8 topics, each with its own 24-word vocabulary mixed into a
     sparse Markov chain over 252 words;
  2. a tiny fused-QKV Llama *pretrained* on that corpus (full-parameter AdamW, a few seconds) and
     saved as `model/config.json` + `model/model.safetensors`: the stand-in for Llama-2-70B;
  3. a synthetic summarisation task in the GovReport reference format: `[BOS] report [SEP]
     summary [EOS]`, where the summary is the report's topic template (8 topic words, each
     replaced by a random topic word with probability 0.1); labels are -100 on BOS + report + SEP
     (the prompt), so only summary tokens and EOS are scored, written as
     `gov_report/{train,validation}-00000-of-00001.parquet` with columns input_ids, labels;
  4. `PREPARED.json`: sha256 of every file plus the config fields the data depends on.
The base model never saw a summary: LoRA has to learn to infer the topic from the report and
write its summary, so the answer loss falls from ~4 (uniform over the topic words) towards the
noise floor (~0.6).
Full: check that the dataset and checkpoint are where the plan says (ConfigError naming the file).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from benchmarks.llama2_70b_lora import DATA
from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from harness.core.runplan import RunPlan

PAD, BOS, EOS, SEP = 0, 1, 2, 3
FIRST_WORD = 4
TOPIC_WORDS = 24
P_TOPIC = 0.5  # chance that the next report word is a topic word rather than the Markov successor
SUCCESSORS = 4
PRETRAIN_BATCH = 16
PRETRAIN_LR = 3.0e-3


class Language:
    """The synthetic language: a fixed-seed Markov chain plus per-topic vocabularies/templates."""

    def __init__(self, cfg, seed: int = 0):
        r = random.Random(seed)
        v = cfg.vocab_size
        words = list(range(FIRST_WORD, v))
        self.succ = {w: [r.choice(words) for _ in range(SUCCESSORS)] for w in words}
        self.topic_words = [r.sample(words, TOPIC_WORDS) for _ in range(cfg.tiny_num_topics)]
        self.templates = [r.sample(tw, min(cfg.tiny_summary_length, TOPIC_WORDS)) for tw in self.topic_words]
        self.cfg = cfg

    def text(self, r: random.Random, topic: int, n: int) -> list[int]:
        tw = self.topic_words[topic]
        out = [r.choice(tw)]
        while len(out) < n:
            out.append(r.choice(tw) if r.random() < P_TOPIC else r.choice(self.succ[out[-1]]))
        return out

    def report(self, r: random.Random) -> tuple[list[int], list[int]]:
        c = self.cfg
        s = c.tiny_summary_length
        topic = r.randrange(c.tiny_num_topics)
        body = self.text(r, topic, c.max_sequence_length - s - 3)
        tmpl = self.templates[topic]
        summary = [
            tmpl[i % len(tmpl)] if r.random() >= c.tiny_summary_noise else r.choice(self.topic_words[topic])
            for i in range(s)
        ]
        ids = [BOS, *body, SEP, *summary, EOS]
        labels = [-100] * (len(body) + 2) + summary + [EOS]
        return ids, labels


def write_split(path: Path, rows: list[tuple[list[int], list[int]]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {"input_ids": [a for a, _ in rows], "labels": [b for _, b in rows]},
        schema=pa.schema([("input_ids", pa.list_(pa.int32())), ("labels", pa.list_(pa.int32()))]),
    )
    pq.write_table(table, path)


def pretrain_base(cfg, lang: Language, seed: int = 0):
    """Full-parameter pretraining of the tiny base on plain reports (no summaries)."""
    import torch

    from reference_impls.llama2_70b_lora.model import build_base

    torch.manual_seed(seed)
    model = build_base(cfg, "cpu", seed=seed)
    r = random.Random(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=PRETRAIN_LR, weight_decay=0.0)
    steps, t = cfg.tiny_pretrain_steps, cfg.max_sequence_length
    loss = None
    for step in range(steps):
        x = torch.tensor(
            [[BOS, *lang.text(r, r.randrange(cfg.tiny_num_topics), t - 1)] for _ in range(PRETRAIN_BATCH)]
        )
        lr = PRETRAIN_LR * min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, (loss.item() if loss is not None else float("nan"))


def prepare_tiny(plan: RunPlan) -> Path:
    import torch

    from reference_impls.llama2_70b_lora import data
    from reference_impls.llama2_70b_lora.checkpoint import save_base

    torch.set_num_threads(max(1, plan.threads_per_process))
    cfg = Llama2LoraConfig.model_validate(plan.config)
    root = Path(plan.data_dir)
    lang = Language(cfg)
    # Train and eval rows come from separate seeded streams, so neither depends on the other's size.
    tr, ev = random.Random(2), random.Random(3)
    train = [lang.report(tr) for _ in range(cfg.train_samples)]
    evals = [lang.report(ev) for _ in range(cfg.eval_samples)]
    ds = root / cfg.dataset_dir
    write_split(ds / data.TRAIN_FILE, train)
    write_split(ds / data.EVAL_FILE, evals)
    model, final_loss = pretrain_base(cfg, lang)
    files = save_base(model, root / cfg.model_dir)
    files += [ds / data.TRAIN_FILE, ds / data.EVAL_FILE]
    return DATA.write(plan, files, {"pretrain_final_loss": round(final_loss, 4), "not_submittable": True})


def validate_full(plan: RunPlan) -> list[Path]:
    """Every file the full run reads, checked (columns, the checkpoint's config); ConfigError else."""
    from reference_impls.llama2_70b_lora import data
    from reference_impls.llama2_70b_lora.checkpoint import check_checkpoint_config, checkpoint_files

    cfg = Llama2LoraConfig.model_validate(plan.config)
    for f in data.dataset_files(Path(plan.data_dir), cfg):
        data.check_columns(f)
    md = Path(plan.data_dir) / cfg.model_dir
    files = checkpoint_files(md)
    check_checkpoint_config(md, cfg)
    return [*data.dataset_files(Path(plan.data_dir), cfg), md / "config.json", *files]


def prepare(plan: RunPlan) -> None:
    if plan.size == "tiny":
        print(prepare_tiny(plan))
    else:
        print(DATA.write(plan, validate_full(plan)))
