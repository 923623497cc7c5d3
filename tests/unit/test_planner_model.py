"""harness/planner: RCP arithmetic against the official checker, the memory model on NVIDIA's v4.0
record configs, and the fitted constants on the published results the project ships."""

from __future__ import annotations

import pytest

from harness.core.errors import ConfigError
from harness.planner import calibration as C
from harness.planner import fitting as F
from harness.planner import rcp, report
from harness.planner import search as S

ROWS = C.published()


@pytest.mark.parametrize(
    "bench,bs",
    [
        ("gpt3", 2304),
        ("gpt3", 2904),
        ("gpt3", 4096),
        ("gpt3", 1536),
        ("llama2_70b_lora", 8),
        ("llama2_70b_lora", 48),
        ("gnn", 16384),
        ("gnn", 65536),
        ("stable_diffusion", 512),
        ("stable_diffusion", 1536),
    ],
)
def test_rcp_mean_matches_the_official_checker(bench, bs):
    from mlperf_logging.rcp_checker import rcp_checker

    chk = rcp_checker.RCP_Checker("training", "4.0.0", bench, verbose=False)
    rec = chk._find_rcp(bs, "pruned_rcps")
    if rec is None:
        lo = chk._find_top_min_rcp(bs, "pruned_rcps")
        hi = chk._find_bottom_max_rcp(bs, "pruned_rcps")
        rec = chk._find_min_rcp("pruned_rcps") if lo is None else chk._create_interp_rcp(bs, lo, hi)[1]
    assert rcp.converge(bench, bs) == pytest.approx(rec["RCP Mean"], rel=1e-9)


def test_rcp_values_from_the_notes():
    assert rcp.converge("gpt3", 2304) == pytest.approx(1_189_085_184)
    assert rcp.converge("gpt3", 2904) == pytest.approx(1_203_830_784)
    assert rcp.converge("llama2_70b_lora", 8) == pytest.approx(3178.6667, rel=1e-6)
    with pytest.raises(ConfigError, match="Missing RCP"):
        rcp.converge("gpt3", 8200)
    with pytest.raises(ConfigError, match="below the smallest"):
        rcp.check_bs("gpt3", 1024)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_record_config_fits_in_memory(row):
    hw = row.hardware()
    cand, mem = C.candidate_for(row, hw, C.constants())
    assert sum(mem.values()) <= hw.memory_gib, f"{row.id}: {mem}"


# The planner disagrees with NVIDIA on L40S: over PCIe it prefers less TP (TP2 x PP4 x CP4, ~10 %
# faster by the model) to NVIDIA's TP4 x CP2.
DISAGREE = {"llama2_70b_lora/l40s_n16", "llama2_70b_lora/l40s_n96"}


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="planner ranks this record layout lower"))
        if r.id in DISAGREE
        else r
        for r in ROWS
        if r.bench in ("gpt3", "llama2_70b_lora")
    ],
    ids=[r.id for r in ROWS if r.bench in ("gpt3", "llama2_70b_lora")],
)
def test_record_layout_in_top5_at_its_batch(row):
    """NVIDIA's layout is among the 5 best distinct layouts, or predicted within 5 % of the best
    (closer than the model's held-out error: the planner cannot tell them apart)."""
    plan = S.search_layouts(row.bench, row.hardware(), gbs=row.gbs)
    ranked = report.distinct(plan, 10_000)
    keys = [(o.candidate.tp, o.candidate.pp, o.candidate.vp, o.candidate.cp, o.candidate.mbs) for o in ranked]
    ref = (row.tp, row.pp, row.vp, row.cp, row.mbs)
    assert ref in keys, "record layout not even considered"
    rank = keys.index(ref)
    gap = ranked[rank].minutes / ranked[0].minutes - 1
    assert rank < 5 or gap <= 0.05, (rank, f"{gap:.1%}", keys[:5])


def test_shipped_constants_fit_the_published_rows():
    k = C.constants()
    errs = [F.ape(C.predict(r, k), r.score_min) for r in ROWS]
    med, p90 = F.summary(errs)
    assert med <= 7 and p90 <= 20, (med, p90)
    assert set(C.efficiency_file()["fitted_on"]) <= {r.id for r in ROWS}


def test_gnn_feature_store_placement_matches_nvidia():
    k = C.constants()
    where = {r.id: C.candidate_for(r, r.hardware(), k)[0].feature_store for r in ROWS if r.bench == "gnn"}
    assert where == {"gnn/eos": "host", "gnn/h200": "node", "gnn/eos_n8": "global", "gnn/eos_n64": "global"}
