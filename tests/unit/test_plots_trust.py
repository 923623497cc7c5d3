"""Plots and numbers a reader can trust (issue 47): `results compare` speedups only like for like,
the plots' markers, log ticks and names, `plan --plot`'s band, stack and published rounds, and the
stack a descriptor is priced as (a YAML and its exported JSON of one machine)."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
from click.testing import CliRunner
from fixtures import fixture_path

from harness.cli import cli
from harness.review.results.compare import compare, short_accelerator


def _row(rnd, sub, acc, n, minutes, bench="llama2_70b_lora"):
    return {"round": rnd, "submitter": sub, "system": f"{sub}_{n}", "benchmark": bench,
            "accelerator": acc, "accelerators": n, "score_min": minutes}  # fmt: skip


H100, B200 = "NVIDIA H100-SXM5-80GB", "NVIDIA Blackwell GPU (B200-SXM-180GB)"


def test_compare_prints_speedups_only_like_for_like(capsys):
    """The published fixtures' llama2_70b_lora: v4.0's best is 1,024 H100 (1.49 min), v4.1's only
    result 32 H100 (8.22 min): no '0.18x' between them, the two named; v4.1 against v4.0's own
    32-H100 result is the like-for-like speedup."""
    old = pd.read_csv(fixture_path("published_v3.0-v4.0/scores.csv"))
    old = old[(old["benchmark"] == "llama2_70b_lora") & (old["round"] == "v4.0")]
    df = pd.DataFrame(
        [_row("v4.0", r.submitter_folder, r.accelerator_model_name, r.accelerators_count, r.score_min)
         for r in old.itertuples()]
        + [_row("v4.1", "Lambda", H100, 32, 8.22296), _row("v5.0", "Lenovo", B200, 8, 11.3245)]
    )  # fmt: skip
    doc = compare(df, "llama2_70b_lora")
    v40, v41, v50 = doc["rounds"]
    assert (v40["best_accelerators"], v41["best_accelerators"]) == (1024, 32)
    assert v41["speedup_best"] is None and v41["speedup_best_unlike"] == "1024 H100 vs 32 H100"
    like = v41["speedup_like"]
    at32 = old[old["accelerators_count"] == 32]["score_min"].min()
    assert (like["accelerator"], like["accelerators"]) == ("H100", 32)
    assert like["speedup"] == pytest.approx(at32 / 8.22296)
    assert v50["speedup_best"] is None and v50["speedup_best_unlike"] == "32 H100 vs 8 B200"
    assert v50["speedup_like"] is None  # v4.1 has no B200 at 8
    v51 = df[df["round"] == "v5.0"].assign(round="v5.1", score_min=lambda d: d["score_min"] / 2)
    same = pd.concat([df, v51], ignore_index=True)  # 8 B200 again, twice as fast
    assert compare(same, "llama2_70b_lora")["rounds"][-1]["speedup_best"] == pytest.approx(2.0)

    from harness.commands.results_render import compare_table

    compare_table(doc)
    out = " ".join(capsys.readouterr().out.split())  # as one line: the text wraps at 80
    assert "- (1024 H100 vs 32 H100)" in out and "0.18x" not in out
    assert "only between the same accelerator at the same count" in out


def _rounds_df(scales, seed=3):
    rng = random.Random(seed)
    accs = [H100, "NVIDIA L40S", "AMD Instinct MI300X 192GB HBM3", "Intel Gaudi2", "TPU-v5p", B200]
    subs = ["Supermicro", "CoreWeave", "NVIDIA", "Lenovo", "HPE", "ASUSTeK", "Nebius", "MangoBoost"]
    return pd.DataFrame(
        [_row(r, rng.choice(subs), rng.choice(accs), (n := rng.choice(scales)), 900 / n**0.7 * rng.uniform(0.8, 1.4))
         for r in ("v5.0", "v5.1") for _ in range(60)]
    )  # fmt: skip


def _labelled_ticks(axis, lo, hi) -> list[str]:
    return [
        t.get_text()
        for t in axis.get_ticklabels()
        if t.get_text() and lo <= t.get_position()[0 if axis.axis_name == "x" else 1] <= hi
    ]


def _check_log_axes(ax):
    ax.figure.canvas.draw()
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        assert len(_labelled_ticks(axis, lo, hi)) >= 3, (axis.axis_name, lo, hi)


def test_compare_plot_markers_ticks_and_names():
    """A flux1-like round (8-72 accelerators, 20-80 min: less than a decade each way, where one
    tick '10' was all) and six accelerators of six families: a marker shape per family, three or
    more labelled ticks on both log axes, names that neither overlap nor leave their panel."""
    from harness.core.plot_style import family
    from harness.review.results.plot import figure

    df = _rounds_df([8, 16, 32, 64, 72])
    fams = {family(a) for a in df["accelerator"]}
    assert len(fams) == 6
    fig = figure(df, "llama2_70b_lora")
    shapes = {str(h.get_marker()) for h in fig.legends[0].legend_handles[: df["accelerator"].nunique()]}
    assert len(shapes) >= len(fams)
    _check_log_axes(fig.axes[0])  # the panels share both axes; the others' labels are hidden
    for ax in fig.axes:
        renderer = fig.canvas.get_renderer()
        box, boxes = ax.get_window_extent(renderer), [t.get_window_extent(renderer) for t in ax.texts]
        assert ax.texts
        for i, b in enumerate(boxes):
            assert box.x0 <= b.x0 and b.x1 <= box.x1 and box.y0 <= b.y0 and b.y1 <= box.y1, ax.texts[i]
            assert not any(b.overlaps(o) for o in boxes[:i]), ax.texts[i].get_text()
    # small dots carry their family's shape too: more than one marker path among the scatters
    assert len({id(c.get_paths()[0]) for c in fig.axes[0].collections}) > 1
    assert short_accelerator(H100) == "H100"


@pytest.fixture(scope="module")
def plan_figure():
    import benchmarks
    from harness import planner
    from harness.planner import plot, stacks

    hw = planner.resolve_hardware("dgx-h100x8")
    st = stacks.for_plan(hw)
    result = planner.search.search_layouts(benchmarks.get("llama2_70b_lora"), hw, stack=st)
    return plot.figure(result), st


def test_plan_plot_band_stack_and_every_round(plan_figure):
    from harness.planner import calibration as C

    fig, st = plan_figure
    (ax,) = fig.axes
    assert [c for c in ax.collections if c.get_gid() == "range-band"]  # the table's 80 % range
    assert f"stack {st.key}" in ax.get_title() and st.key == "mlperf-harness"
    rounds = sorted({r.round for r in C.published() if r.bench == "llama2_70b_lora"})
    assert rounds[-1] == "v4.1" and f"{rounds[0]}-{rounds[-1]}" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("80 % range" in t for t in labels) and any(f"stack {st.key}" in t for t in labels)
    published = [h for h, t in zip(ax.get_legend().legend_handles, labels) if t.startswith("published")]
    assert len({h.get_marker() for h in published}) >= 5  # hopper, blackwell, ampere, ada, gaudi
    _check_log_axes(ax)


def _plan(*args) -> tuple[float, str]:
    res = CliRunner().invoke(cli, ["plan", "llama2_70b_lora", *args, "--top", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    doc = json.loads(CliRunner().invoke(cli, ["plan", "llama2_70b_lora", *args, "--json"]).output)
    return doc["predicted_min"], " ".join(res.output.split())  # as one line: the text wraps at 80


def test_a_yaml_and_its_exported_json_are_priced_alike_or_the_stack_is_named(tmp_path):
    exported = tmp_path / "dgx-h100x1.json"
    res = CliRunner().invoke(cli, ["systems", "export", "dgx-h100x1", "-o", str(exported)])
    assert res.exit_code == 0, res.output
    yaml_min, yaml_out = _plan("--system", "dgx-h100x1")
    json_min, json_out = _plan("--system-json", str(exported))
    # its framework text says mlperf-harness: the exported JSON is this harness's stack too
    assert json_min == pytest.approx(yaml_min) and "stack: mlperf-harness" in json_out
    assert "its exported system JSON names it too" in yaml_out
    # the same machine as NVIDIA's JSON names it: its own stack, named, and --stack prices both alike
    doc = json.loads(exported.read_text())
    nvidia = tmp_path / "nvidia.json"
    nvidia.write_text(json.dumps({**doc, "framework": "NVIDIA NeMo Framework Release 24.04"}))
    ngc_min, ngc_out = _plan("--system-json", str(nvidia))
    assert ngc_min != pytest.approx(yaml_min)
    assert "stack: nvidia-ngc@24.04" in ngc_out and "--stack mlperf-harness to compare" in ngc_out
    for forced in ("nvidia-ngc@24.04", "mlperf-harness"):
        a, a_out = _plan("--system", "dgx-h100x1", "--stack", forced)
        b, _ = _plan("--system-json", str(nvidia), "--stack", forced)
        assert a == pytest.approx(b), forced
        assert f"stack: {forced} (--stack" in a_out  # said to be forced
        if forced != "mlperf-harness":  # and what the descriptor alone is priced as
            assert "(--stack; without it mlperf-harness" in a_out
    _, gb_out = _plan("--system", "gb200-nvl72")  # its framework text names no harness
    assert (
        "its exported system JSON is priced as nvidia-ngc" in gb_out
        and "--stack nvidia-ngc to compare" in gb_out
    )


def test_plot_families_agree_with_the_planners_catalogue():
    """core's name patterns (core may not read the planner's data) give every catalogued chip
    the planner's family, from its full and its short name."""
    from harness.core.plot_style import family
    from harness.planner.hardware import load_data

    data = load_data("accelerators.yaml")
    for e in data["accelerators"] if isinstance(data, dict) else data:
        assert family(e["name"]) == family(short_accelerator(e["name"])) == e["family"], e["name"]
