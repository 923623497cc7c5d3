"""Worker of test_deepseek_tiny.py's full-size-start test (torchrun, 2 ranks; prints one RESULT line).

The full size starts from a converted checkpoint through `dist_ckpt.load_weights` (the weights and
the routers' expert bias, a fresh optimizer). Here, at tiny size:
1. EP 2 (DP 2, fp32) loads the prepared tiny start, evaluates, and writes its weights with
   `dist_ckpt.save_weights` (megatron's sharded form: experts by global index).
2. Another layout, TP 2 + SP + EP 2 with the distributed optimizer in bf16 (fp32 master weights),
   builds a model from another seed and loads that folder with `load_weights`: its evaluation is the
   first layout's (to bf16), and after one training step it still is (so the master weights the
   optimizer steps followed the load, not the init).
argv: DATA_DIR (a prepared tiny deepseekv3_671b folder) FOLDER (where to write the weights).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import yaml

import benchmarks
from harness.core.layout import derive
from reference_impls.megatron_gpt import data, datafiles, dist_ckpt, train
from reference_impls.megatron_gpt import model as gm

BENCH = benchmarks.get("deepseekv3_671b")


def _config(**kw):
    values = yaml.safe_load((BENCH.configs_dir / "tiny.yaml").read_text())["config"]
    return BENCH.config.model_validate({**values, **kw})


def _start(cfg, seed: int):
    lay = derive(cfg, 1, dist.get_world_size(), num_layers=cfg.num_layers, supports=type(cfg).SUPPORTS)
    train.init_parallel(lay, seed, cfg)
    model, opt, sched, tcfg = gm.build(cfg, lay, "cpu", seed)
    return train.Stepper(model, opt, sched, tcfg, cfg, lay, "cpu"), lay


def main(data_dir: Path, folder: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    a = _config(expert_model_parallel_size=2, micro_batch_size=8)
    st, lay = _start(a, seed=7)
    state = torch.load(data_dir / datafiles.CHECKPOINT, map_location="cpu", weights_only=True)
    gm.load_tiny_state(st.model, st.optimizer, state)
    trainset, valid = data.build_datasets(data_dir, a, "tiny", 7, folder.parent / "index_cache")
    evals = lambda la: train.eval_microbatches(valid, train.data_rank(la), la.dp, la.micro_batch_size)  # noqa: E731
    eval_a = st.evaluate(evals(lay))
    dist_ckpt.save_weights(st.model, folder)
    train._teardown()

    b = _config(
        expert_model_parallel_size=2,
        tensor_model_parallel_size=2,
        sequence_parallel=True,
        distributed_optimizer=True,
        precision="bf16",
    )
    st, lay = _start(b, seed=99)  # another init: only the load can make it the first model
    eval_init = st.evaluate(evals(lay))
    dist_ckpt.load_weights(st.model, st.optimizer, folder)
    eval_b = st.evaluate(evals(lay))
    st.train_step(train.train_microbatches(trainset, 0, lay))
    eval_stepped = st.evaluate(evals(lay))
    train._teardown()
    if dist.get_rank() == 0:
        result = {"eval_a": eval_a, "eval_init": eval_init, "eval_b": eval_b, "eval_stepped": eval_stepped}
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
