"""gnn precision switches as the GPU configs set them, proven on CPU: `fp8_features` keeps the
feature store in FP8 and upcasts after the gather; `amp` autocasts the model's forward to bf16."""

import pytest
import torch
import torch.nn.functional as F
from helpers import make_plan, typed_config

from reference_impls.gnn import data, prepare, train
from reference_impls.gnn.model import RGAT
from reference_impls.gnn.sampler import HeteroNeighborSampler

SMALL = ("num_nodes={paper: 2000, author: 3000, institute: 40, fos: 60}", "num_labeled_papers=2000")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("gnn-precision")
    plan = make_plan("gnn", root, seed=1, sets=SMALL, data_dir=root / "data")
    prepare.prepare(plan)
    cfg = typed_config(plan)
    sampler = HeteroNeighborSampler(
        data.load(plan.data_dir, cfg, in_memory=True).csc,
        dict(cfg.num_nodes),
        cfg.fan_out,
        torch.Generator().manual_seed(0),
    )
    return plan, cfg, sampler.sample(torch.arange(64))


def _cfg(cfg, **over):
    return cfg.model_copy(update=over)


def test_fp8_features_store_is_fp8_and_the_gather_upcasts(small):
    plan, cfg, batch = small
    fp32 = data.load(plan.data_dir, _cfg(cfg, fp8_features=False), in_memory=True)
    fp8 = data.load(plan.data_dir, _cfg(cfg, fp8_features=True), in_memory=True)
    assert {f.dtype for f in fp32.features.values()} == {torch.float32}
    assert {f.dtype for f in fp8.features.values()} == {torch.float8_e4m3fn}  # a quarter of the bytes
    assert fp8.features["paper"].element_size() == 1
    xs32, _, _ = train._batch_inputs(fp32, batch, CPU, False)
    xs8, edges, y = train._batch_inputs(fp8, batch, CPU, True)
    for t, x in xs8.items():
        assert x.dtype == torch.float32  # upcast after the gather: the model sees fp32 inputs
        assert torch.equal(x, xs32[t].to(torch.float8_e4m3fn).float())  # exactly the e4m3 values
        assert not torch.equal(x, xs32[t])  # and they were quantised (3 mantissa bits)
    # Full size keeps the fp32 memory map and quantises each gathered batch: the same values.
    mapped = data.load(plan.data_dir, _cfg(cfg, fp8_features=True), in_memory=False)
    xs_mapped, _, _ = train._batch_inputs(mapped, batch, CPU, True)
    assert all(torch.equal(xs_mapped[t], xs8[t]) for t in xs8)


def _forward(cfg, xs, edges, batch, y):
    """One forward (train mode off: no dropout) under the run's autocast; the dtypes every conv's
    linear layer and the classifier produced, the loss and the classifier's gradient."""
    torch.manual_seed(0)
    model = RGAT.from_config(cfg).eval()
    seen = set()
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Linear":
            m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
    with train._autocast(cfg, CPU):
        loss = F.cross_entropy(model(xs, edges, batch.batch_size).float(), y)
    loss.backward()
    return seen, float(loss.detach()), model.lin.weight.grad


def test_amp_autocasts_the_forward_to_bf16_and_keeps_fp32_weights(small):
    plan, cfg, batch = small
    xs, edges, y = train._batch_inputs(data.load(plan.data_dir, cfg, in_memory=True), batch, CPU, False)
    off_dtypes, off_loss, off_grad = _forward(_cfg(cfg, amp=False), xs, edges, batch, y)
    on_dtypes, on_loss, on_grad = _forward(_cfg(cfg, amp=True), xs, edges, batch, y)
    assert off_dtypes == {torch.float32}
    assert on_dtypes == {torch.bfloat16}  # every linear (GATConv's and the classifier) ran in bf16
    assert on_grad.dtype == torch.float32  # weights and their gradients stay fp32 (Adam updates fp32)
    # Same weights, same batch: bf16 (8-bit mantissa, ~0.4 % per rounding) moves the initial loss by
    # well under 1 %, while the loss itself is ~ln(19) = 2.9.
    assert on_loss == pytest.approx(off_loss, rel=1e-2) and on_loss != off_loss
