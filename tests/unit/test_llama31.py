"""llama31_8b's own facts, torch-free where they can be: the rules' arithmetic in its config, the
parameter count of the reference shape, what `prepare --size full` names, and the provider's
architecture (the family's build of it: tests/integration/test_llama31_tiny.py, --dry-run --build:
test_build_configs.py)."""

from __future__ import annotations

import pytest

import benchmarks
from benchmarks.llama31_8b.config import Llama31Config
from benchmarks.llama31_8b.cost import COST
from harness.core import rulesets


def test_the_rules_arithmetic():
    c = Llama31Config(global_batch_size=32)
    # warmup from the RCPs' sequences; decay = max_steps - warmup (closed_llama31_8b.yaml); end LR 10 %
    assert (c.opt_learning_rate_warmup_steps, c.opt_learning_rate_decay_steps) == (128, 1_200_000 - 128)
    assert c.decay_end_step() == 1_200_000 and c.opt_end_learning_rate == pytest.approx(8e-5)
    assert c.eval_interval_steps == 384 and c.eval_interval_steps * 32 == 12288
    assert Llama31Config(global_batch_size=100).eval_interval_steps == 123  # ceil(12288 / 100)
    assert c.stop_step() is None and c.start_step() == 0 and not c.FROM_CHECKPOINT
    with pytest.raises(ValueError, match="num_query_groups"):
        Llama31Config(global_batch_size=32, num_query_groups=5)


def test_the_reference_shape_has_8_030_261_248_parameters():
    c = Llama31Config(global_batch_size=32)
    assert COST.parameters(c)["total"] == 8_030_261_248
    # the word embedding and the untied output layer, 128,256 x 4,096 each, on the first/last stage
    first, *_, last = COST.stages(c, tp=1, pp=4)
    assert first - last == -4096  # the final RMSNorm is the only difference


def test_rulesets_and_name():
    b = benchmarks.get("llama31_8b")
    assert {"5.1.0", "6.0.0", "6.1.0"} <= set(rulesets.names_by_ruleset(b.official))
    assert benchmarks.get("llama3.1-8b") is b and b.rules.quality[0].full == 3.3


def test_full_data_says_every_missing_file_and_where_each_comes_from(tmp_path):
    from harness.core.errors import ConfigError
    from reference_impls.megatron_gpt.llama31 import FULL_DATA
    from reference_impls.megatron_gpt.prepare import check_full

    with pytest.raises(ConfigError) as e:
        check_full(tmp_path, "llama31_8b", FULL_DATA)
    msg = str(e.value)
    assert "\n" not in msg and "c4-train.en_6_text_document.idx" in msg
    assert "tokenizer/tokenizer.json (from the Llama 3.1 8B tokenizer" in msg
    assert "llama-3-1-8b-preprocessed-c4-dataset.uri" in msg


def test_the_provider_builds_llama_3_1():
    from reference_impls.megatron_gpt import llama31

    c = Llama31Config(global_batch_size=32)
    t = llama31.transformer_fields(c)
    assert (t["normalization"], t["gated_linear_unit"], t["add_bias_linear"]) == ("RMSNorm", True, False)
    assert t["num_query_groups"] == 8 and t["activation_func"].__name__ == "silu"
    m = llama31.model_fields(c)
    assert m["position_embedding_type"] == "rope" and m["rotary_base"] == 500000
    assert m["rope_scaling"] and m["rope_scaling_factor"] == 8.0
    assert not m["share_embeddings_and_output_weights"]
