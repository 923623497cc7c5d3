"""Typed GNN (R-GAT) config. Defaults are the reference at full size; configs/tiny.yaml shrinks it.

Batch arithmetic (the only closed-division tunables are the batch size and the LR):
    GBS = DP x micro_batch_size x GA        (seed papers per optimizer step, all ranks)
    steps per epoch = floor(train seeds / GBS); an evaluation every 1/evals_per_epoch epoch
    e.g. NVIDIA h200 (8 GPUs): GBS 16384 = 8 x 2048 x 1 -> 94,605,581 / 16384 = 5774 steps per
    epoch, an evaluation every 289 steps (epoch_num 0.05, 0.10, ...).
Train/validation split (the reference's split_seeds.py): randperm(num_labeled_papers) with seed 42;
the first 60 % train, the next validation_frac validation -> 94,605,581 / 788,379 at full size.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from benchmarks.base import BenchmarkConfig, Switch

# IGBH-Full node counts (the reference's dataset.py / IGB paper); the loader checks files against them.
IGBH_FULL_NODES = {
    "paper": 269_346_174,
    "author": 277_220_883,
    "institute": 26_918,
    "fos": 712_960,
    "journal": 49_052,
    "conference": 4_547,
}

# IGBH relations (source type, relation, destination type); the model also sees each reversed,
# except the symmetric `cites` (reference_impls/gnn/data.py builds the edge types from these).
IGBH_RELATIONS = (
    ("paper", "cites", "paper"),
    ("paper", "written_by", "author"),
    ("author", "affiliated_to", "institute"),
    ("paper", "topic", "fos"),
    ("paper", "published", "journal"),
    ("paper", "venue", "conference"),
)


class GnnConfig(BenchmarkConfig):
    # ---- batch (overrides the shared defaults) ----------------------------------------------
    global_batch_size: int = Field(4096, ge=1)
    """Seed papers per optimizer step over all ranks (logged `global_batch_size`; RCPs at 4096..262144)."""
    micro_batch_size: int = Field(1024, ge=1)
    """Seed papers per rank per forward/backward (the reference's per-GPU batch, 1024)."""

    # ---- model: R-GAT (PyG HeteroConv of one GATConv per edge type) --------------------------
    num_layers: int = Field(3, ge=1)
    """Message-passing layers (= sampling hops); fixed at 3 in the closed division."""
    hidden_channels: int = Field(512, ge=4)
    """Hidden width (heads x channels per head); fixed at 512."""
    num_heads: int = Field(4, ge=1)
    """GAT attention heads per layer; fixed at 4."""
    dropout: float = Field(0.2, ge=0.0, lt=1.0)
    """Dropout after every hidden layer; fixed at 0.2."""
    fan_out: list[int] = [15, 10, 5]
    """Neighbours sampled per node and edge type, hop 1 (from the seeds) first; fixed at 15,10,5."""
    in_channels: int = Field(1024, ge=1)
    """Node feature width (1024 in IGBH, every node type)."""
    num_classes: int = Field(2983, ge=2)
    """Paper classes: 2983 reads paper/node_label_2K.npy, 19 reads paper/node_label_19.npy."""

    # ---- optimizer (log keys) ----------------------------------------------------------------
    opt_name: Literal["adam"] = "adam"
    """Logged `opt_name`; the reference uses Adam (closed-rule check: 'adam')."""
    opt_base_learning_rate: float = Field(0.001, ge=0.0)
    """Adam learning rate, constant (reference 1e-3 at GBS 4096; NVIDIA 2e-3 at 16384, 5e-3 at 262144)."""

    # ---- data ---------------------------------------------------------------------------------
    dataset_size: str = "full"
    """Folder under the data dir: `<data_dir>/<dataset_size>/processed/...` (IGBH layout)."""
    num_nodes: dict[str, int] = dict(IGBH_FULL_NODES)
    """Nodes per type; the node types of the graph are exactly these keys."""
    num_labeled_papers: int = Field(157_675_969, ge=1)
    """Papers 0..N-1 carry a label and are split into train/validation seeds (2K labels: 157,675,969)."""
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    """Fraction of labelled papers used as training seeds (the reference's split: 0.6)."""
    validation_frac: float = Field(0.005, gt=0.0, lt=1.0)
    """Fraction of labelled papers used as validation seeds (the reference's split: 0.005)."""
    split_seed: int = Field(42, ge=0)
    """torch.manual_seed of the reference's split (`split_seeds.py --random_seed 42`)."""

    # ---- evaluation and stopping -------------------------------------------------------------
    evals_per_epoch: int = Field(20, ge=1)
    """Evaluations per epoch (the rules: every 0.05 epoch); epoch_num is logged as that fraction."""
    eval_micro_batch_size: int = Field(1024, ge=1)
    """Validation seeds per rank per forward (NVIDIA: 1024-2048)."""
    max_epochs: float = Field(2.0, gt=0.0)
    """Give up (status aborted, exit 3) after this many epochs without reaching the target."""
    checkpoint_interval_steps: int = Field(1000, ge=0)
    """Resumable checkpoint (`mlperf run --resume`) at the first evaluation after every N steps;
    0 = never. Full: 1000 (about one per evaluation); tiny: a few seconds' worth."""

    # ---- tiny synthetic graph (used only by `prepare` at tiny size) --------------------------
    synth_edges_per_paper: dict[str, float] = {
        "cites": 4.0,
        "written_by": 3.0,
        "topic": 2.0,
        "affiliated_to": 1.0,
    }
    """Mean out-edges per source node of each relation (affiliated_to: per author); cites is made
    symmetric, so a paper has about 8 citing/cited neighbours."""
    synth_homophily: float = Field(0.9, ge=0.0, le=1.0)
    """Probability that a planted edge joins nodes of the same class (cites, written_by, topic)."""
    synth_feature_noise: float = Field(4.0, ge=0.0)
    """Std of the Gaussian noise around each node's class centroid (unit-normal centroids in
    in_channels dims): at 4 a linear probe on a paper's own features reaches 0.34 (at 2: 0.79, above
    the target), so the target needs the neighbours (tests/unit/test_gnn_signal.py)."""
    synth_seed: int = Field(1234, ge=0)
    """Seed of the synthetic graph (the data is a pure function of these synth_* fields and sizes)."""

    # ---- precision switches (NVIDIA's v4.0 records set both; CPU and GPU honour them alike) --------
    fp8_features: bool = False
    """Keep node features as FP8 (e4m3) and upcast to fp32 after the gather (NVIDIA FP8_EMBEDDING):
    an in-memory feature store (tiny) is held in FP8; a memory-mapped fp32 store (full) is cast to
    FP8 right after the host gather, so the host-to-device copy is FP8. Same values either way."""
    amp: bool = False
    """bf16 autocast for the model's forward on the device the run uses (NVIDIA AMP=1); weights,
    gradients, Adam and the loss stay fp32."""

    SWITCHES: ClassVar[dict[str, Switch]] = {
        "fp8": Switch(
            (), "R-GAT has no FP8 matmul path; NVIDIA's v4.0 FP8 is the feature gather, fp8_features here"
        ),
        "cuda_graphs": Switch(
            (),
            "sampled subgraphs change shape every step, so nothing is captured; NVIDIA's v4.0 R-GAT "
            "records used no CUDA graphs either",
        ),
        "fp8_features": Switch(("cpu", "gpu"), ""),
        "amp": Switch(("cpu", "gpu"), ""),
    }
    SUPPORTS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _check(self):
        if self.hidden_channels % self.num_heads:
            raise ValueError(
                f"hidden_channels {self.hidden_channels} is not divisible by num_heads {self.num_heads}"
            )
        if len(self.fan_out) != self.num_layers:
            raise ValueError(f"fan_out has {len(self.fan_out)} hops but num_layers is {self.num_layers}")
        if any(k < 1 for k in self.fan_out):
            raise ValueError(f"fan_out {self.fan_out}: every hop needs at least one neighbour")
        for t in ("paper", "author", "institute", "fos"):
            if t not in self.num_nodes:
                raise ValueError(f"num_nodes lacks node type '{t}'")
        if self.num_labeled_papers > self.num_nodes["paper"]:
            raise ValueError(
                f"num_labeled_papers {self.num_labeled_papers} exceeds the {self.num_nodes['paper']} papers"
            )
        if self.train_frac + self.validation_frac > 1.0:
            raise ValueError("train_frac + validation_frac exceeds 1")
        return self

    def lowest_precision(self, device: str) -> dict[str, str]:
        """What reference_impls/gnn builds (the keys: BenchmarkConfig.lowest_precision). fp8_features
        changes none of the three: train._batch_inputs upcasts the FP8 features to fp32 on the device
        before the model, and a host-to-device copy is no communication between ranks."""
        return {
            # train._autocast: bf16 autocast over the forward when amp (GATConv's and the classifier's
            # Linear), fp32 otherwise (CUDA fp32 matmuls: torch's default, no TF32).
            "linear": "bfloat16" if self.amp else "fp32",
            # GATConv scores edges as (x * att).sum with fp32 `att` parameters: type promotion lifts
            # the logits, softmax and weighted sum to fp32 under autocast too.
            "attn": "fp32",
            # torch DDP all-reduces the grads in their dtype: fp32 (autocast leaves the params fp32).
            "comm": "fp32",
        }

    @property
    def label_file(self) -> str:
        return "node_label_2K.npy" if self.num_classes == 2983 else f"node_label_{self.num_classes}.npy"

    @property
    def num_train_seeds(self) -> int:
        return int(self.num_labeled_papers * self.train_frac)

    @property
    def num_val_seeds(self) -> int:
        return int(self.num_labeled_papers * self.validation_frac)
