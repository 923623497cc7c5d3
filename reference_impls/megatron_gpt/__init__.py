"""The Megatron-GPT family: one megatron-core pretraining implementation (loop, data, checkpoints,
CPU compatibility, meta-device builds) that serves every benchmark whose reference is Megatron GPT
pretraining, each through a small model provider (this package's `gpt3.py`): what is particular
to a model is its layer spec, its TransformerConfig fields and GPTModel's embedding choices; the
rest is shared. A benchmark joins with `implementation(entry, data, family=__name__)` and a config
class that names its provider (`MODEL_PROVIDER`); its process entry stays reference_impls/<name>/."""
