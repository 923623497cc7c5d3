"""Ingest (atomic per-round snapshots), compare across rounds and renames, by time or energy, and the plot."""

from __future__ import annotations

import os

import pytest
from fixtures import fixture_path

from harness.core.errors import ConfigError
from harness.review.results.compare import compare
from harness.review.results.ingest import ingest, load

V40 = fixture_path("mlperf_v4.0")


def test_ingest_replaces_a_round_atomically(tmp_path):
    db = tmp_path / "db"
    a = ingest(str(V40), "v4.0", str(db), check=False)
    assert a["results"] == 5 and a["runs"] == 43 and a["scored"] == 5
    first = os.path.realpath(db / "v4.0")
    ingest(str(V40), "4.0", str(db), check=False)
    assert os.path.realpath(db / "v4.0") != first and not os.path.exists(first)
    assert sorted(os.listdir(db))[-1] == "v4.0" and len(os.listdir(db)) == 2  # link + one snapshot
    df = load(str(db))
    assert len(df) == 5 and set(df["round"]) == {"v4.0"}
    assert len(load(str(db), table="runs")) == 43
    with pytest.raises(ConfigError):
        load(str(db), ["v3.1"])


def test_compare_and_plot(tmp_path):
    db = tmp_path / "db"
    ingest(str(V40), "v4.0", str(db), check=False)
    df = load(str(db))
    older = df.copy()
    older["round"] = "v3.1"
    older["score_min"] = older["score_min"] * 2
    both = __import__("pandas").concat([older, df], ignore_index=True)
    doc = compare(both, "llama2_70b_lora", accelerator="H100")
    assert [r["round"] for r in doc["rounds"]] == ["v3.1", "v4.0"]
    v40 = doc["rounds"][1]
    assert v40["best_score_min"] == pytest.approx(5.252158024691357)
    assert v40["speedup_best"] == pytest.approx(2.0) and v40["matched_scale"] == 64
    assert v40["best_per_accelerator"] == pytest.approx(5.252158024691357 * 64)
    with pytest.raises(ConfigError):
        compare(both, "gpt3", accelerator="TPU")
    from harness.review.results.plot import plot

    out = plot(both, "llama2_70b_lora", str(tmp_path / "p.png"))
    assert os.path.getsize(out) > 10_000


# --- later rounds, renames, energy, the plot ---------------------------------------------------


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    base = tmp_path_factory.mktemp("db")
    rounds = fixture_path("rounds")
    for r in ("v4.1", "v5.0", "v5.1"):
        info = ingest(str(rounds / r), r, str(base / "db"), check=False)
        assert info["ruleset"] == r[1:] + ".0"
    return base / "db"


def test_compare_follows_renames_and_ranks_by_energy(db):
    import pandas as pd

    df = load(str(db))
    assert set(df["ruleset"]) == {"4.1.0", "5.0.0", "5.1.0"} and df["energy_j"].notna().sum() == 2
    gnn = df[df["benchmark"] == "rgat"].assign(
        round="v4.1", benchmark="gnn", score_min=lambda d: d["score_min"] * 1.5
    )
    both = pd.concat([df, gnn], ignore_index=True)
    for name in ("rgat", "gnn"):
        doc = compare(both, name)
        assert doc["names"] == ["gnn", "rgat"]
        assert [(r["round"], r["benchmark"]) for r in doc["rounds"]] == [("v4.1", "gnn"), ("v5.1", "rgat")]
        assert doc["rounds"][1]["speedup_best"] == pytest.approx(1.5)
    doc = compare(df, "llama2_70b_lora", by="energy")
    (v50,) = [r for r in doc["rounds"] if r["round"] == "v5.0"]
    assert v50["best_submitter"] == "Lenovo" and v50["best"] == pytest.approx(6114237.986822284)
    assert v50["best_per_accelerator"] == pytest.approx(6114237.986822284 / 8)
    with pytest.raises(ConfigError, match="no results with a energy score for gpt3"):
        compare(df, "gpt3", by="energy")


def test_plot_never_joins_two_families_and_names_only_the_frontier(tmp_path):
    import random

    import pandas as pd

    from harness.review.results.compare import short_accelerator
    from harness.review.results.plot import figure, frontier, plot

    rng = random.Random(3)
    accs = [
        "NVIDIA H100-SXM5-80GB",
        "NVIDIA L40S",
        "AMD Instinct MI300X 192GB HBM3",
        "Intel(R) Gaudi(R) 2 AI Accelerator",
    ]
    rows = [
        {
            "round": r,
            "submitter": rng.choice("ABCDEFGHIJ"),
            "system": f"s{i}",
            "benchmark": "llama2_70b_lora",
            "accelerator": rng.choice(accs),
            "accelerators": (n := rng.choice([8, 16, 64, 384, 1024])),
            "score_min": 300 / n**0.8 * rng.uniform(0.8, 1.5),
        }
        for r in ("v4.0", "v4.1", "v5.0", "v5.1")
        for i in range(60)
    ]
    df = pd.DataFrame(rows).assign(acc=lambda d: d["accelerator"].map(short_accelerator))
    assert sorted(df["acc"].unique()) == ["Gaudi2", "H100", "L40S", "MI300X"]
    fig = figure(df, "llama2_70b_lora")
    for ax, r in zip(fig.axes, ("v4.0", "v4.1", "v5.0", "v5.1")):
        d = df[df["round"] == r]
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
        assert lines
        for ln in lines:  # every point of a line belongs to one (submitter, accelerator)
            owners = None
            for x, y in zip(ln.get_xdata(), ln.get_ydata()):
                here = {
                    (s, a)
                    for s, a in d[(d["accelerators"] == x) & (d["score_min"] == y)][
                        ["submitter", "acc"]
                    ].values
                }
                owners = here if owners is None else owners & {tuple(o) for o in here}
            assert owners, (r, list(ln.get_xdata()))
        names = [t.get_text() for t in ax.texts]
        assert names == [f[2] for f in frontier(d)]  # names on the frontier only, one per scale
    out = plot(df[df["round"] >= "v5.0"], "llama2_70b_lora", str(tmp_path / "p.png"))  # the file: two rounds
    assert 20_000 < os.path.getsize(out) < 200_000


# --- one result published twice (the same runs under another submitter and system name) ------


def test_a_result_published_twice_is_flagged_and_counted_once(tmp_path):
    """A partner's folder holding AMD's very logs under its own system name: `results score`
    warns once naming both and `results compare` counts the result once, as AMD's (its logs name
    AMD); a database without run_ids (ingested before) is compared as it was."""
    import json
    import shutil

    from click.testing import CliRunner

    from harness.cli import cli
    from harness.review.results.compare import duplicates

    tree = tmp_path / "v5.1"
    shutil.copytree(fixture_path("rounds/v5.1/AMD"), tree / "AMD")
    partner = tree / "Partner"
    shutil.copytree(fixture_path("rounds/v5.1/AMD"), partner)
    (partner / "results" / "MI355X_EPYC_9575F_pytorch").rename(partner / "results" / "partner_mi355x")
    (partner / "systems" / "MI355X_EPYC_9575F_pytorch.json").rename(
        partner / "systems" / "partner_mi355x.json"
    )
    amd, copy = "AMD/MI355X_EPYC_9575F_pytorch/llama31_8b", "Partner/partner_mi355x/llama31_8b"

    def mlperf(*args):
        res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res

    score = mlperf("results", "score", str(tree), "--no-check", "--json")
    twice = [w for w in score.stderr.splitlines() if "published twice" in w]
    assert len(twice) == 1 and amd in twice[0] and copy in twice[0], score.stderr
    rows = {r["submitter"]: r for r in json.loads(score.stdout)["results"]}
    assert rows["Partner"]["duplicate_of"] == amd and rows["AMD"]["duplicate_of"] is None
    assert (
        rows["Partner"]["duplicate_runs"] == 10 and rows["Partner"]["score_min"] == rows["AMD"]["score_min"]
    )

    db = tmp_path / "db"
    ingest(str(tree), "v5.1", str(db), check=False)
    cmp = mlperf("results", "compare", "-b", "llama31_8b", "--db", str(db), "--json")
    twice = [w for w in cmp.stderr.splitlines() if "published twice" in w]
    assert len(twice) == 1 and amd in twice[0] and copy in twice[0] and "counted once" in twice[0]
    doc = json.loads(cmp.stdout)
    (v51,) = doc["rounds"]
    assert v51["results"] == 1 and v51["best_submitter"] == "AMD"
    assert doc["duplicates"] == [
        {"round": "v5.1", "kept": amd, "dropped": copy, "shared_runs": 10, "runs": 10}
    ]
    old = load(str(db)).drop(columns=["run_ids", "submission_org"])  # a database of before
    assert compare(old, "llama31_8b")["rounds"][0]["results"] == 2 and not duplicates(old.to_dict("records"))
