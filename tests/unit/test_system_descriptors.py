"""A submitter's own system (issue 47): `systems validate` lists every problem at once, `--system
NAME` searches ./systems, $MLPERF_SYSTEMS_PATH, then the shipped systems/, a descriptor reuses a
shipped tuned config, and `--nodes N` runs a descriptor at another scale."""

from __future__ import annotations

import shutil

import pytest
import yaml

import benchmarks
from harness.core.errors import ConfigError
from harness.resolve import runplans, systems

MINE = """name: my-node
submitter: MyOrg
system_name: My node
platform: P
nodes: 1
accelerators_per_node: 8
accelerator: {model_name: NVIDIA H100-SXM5-80GB, memory_gib: 79.6, peak_tflops: {bf16: 989.4}}
intra_node_bandwidth_gbs: 450
inter_node_bandwidth_gbs: 50
launcher: {kind: torchrun}
"""


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """`mlperf ARGS` in this process (the real entry point: its exit code and one-line errors)."""
    from harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(list(args))
    got = capsys.readouterr()
    return int(e.value.code or 0), got.out, got.err


def test_validate_reports_four_mistakes_in_one_call(tmp_path, capsys):
    bad = (
        MINE.replace("accelerators_per_node: 8", "acelerators_per_node: 8")  # misspelled key
        .replace("nodes: 1", "nodes: -4")  # a negative node count
        .replace("memory_gib: 79.6", "memory_gib: lots")  # a wrong type
        .replace("platform: P\n", "")  # a missing required field
    )
    (tmp_path / "bad.yaml").write_text(bad)
    code, _out, err = cli(capsys, "systems", "validate", str(tmp_path / "bad.yaml"))
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert code == 2
    assert len(lines) == 4, err  # the misspelling is one line, not also "accelerators_per_node missing"
    assert "unknown key 'acelerators_per_node' (did you mean 'accelerators_per_node'?)" in lines[0]
    text = "\n".join(lines)
    assert "field 'nodes': Input should be greater than or equal to 1, got -4" in text
    assert "field 'accelerator.memory_gib': Input should be a valid number" in text
    assert "field 'platform' is required: add it (Per-node platform name" in text
    assert "Traceback" not in err


def test_run_names_the_first_problem_and_how_many_more(tmp_path):
    (tmp_path / "bad.yaml").write_text(MINE.replace("nodes: 1", "nodes: 0").replace("platform: P\n", ""))
    with pytest.raises(ConfigError, match=r"\(\+1 more: `mlperf systems validate .*bad\.yaml` lists all\)$"):
        systems.load(str(tmp_path / "bad.yaml"))


def test_a_valid_file_and_a_cross_field_check(tmp_path, capsys):
    (tmp_path / "ok.yaml").write_text(MINE)
    assert cli(capsys, "systems", "validate", str(tmp_path / "ok.yaml"))[0] == 0
    # the power check runs after the fields (a model validator): still a line, beside the others
    power = "power: {source: {kind: ipmi, host: [a, b]}}\n"
    (tmp_path / "pw.yaml").write_text(MINE.replace("nodes: 1", "nodes: 3") + power)
    assert systems.problems(tmp_path / "pw.yaml") == [
        f"{tmp_path / 'pw.yaml'}: power.source.host lists 2 address(es) for 3 node(s)"
    ]


def _write(folder, name, text=MINE):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(text.replace("name: my-node", f"name: {name}"))


def test_search_path_order_first_wins_and_says_which(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env_a, env_b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("MLPERF_SYSTEMS_PATH", f"{env_a}:{env_b}")
    _write(env_b, "my-node", MINE.replace("nodes: 1", "nodes: 3"))
    assert systems.load("my-node").nodes == 3  # only in the second env folder
    _write(env_a, "my-node", MINE.replace("nodes: 1", "nodes: 2"))
    assert systems.load("my-node").nodes == 2  # the first env folder before the second
    _write(tmp_path / "systems", "my-node")
    assert systems.load("my-node").nodes == 1  # ./systems before the env folders
    note = systems.source_note("my-node")
    assert note == (
        "system 'my-node': systems/my-node.yaml (first on the search path; also a/my-node.yaml, "
        "b/my-node.yaml, not used)"
    )
    assert systems.found()["my-node"][0].parent.name == "systems"
    # a shipped name shadowed by the user's file: the user's wins, and the dry run says so
    _write(
        tmp_path / "systems", "dgx-h100x8", MINE.replace("nodes: 1", "nodes: 8").replace("torchrun", "slurm")
    )
    r = runplans.resolve_runs(benchmarks.get("llama2_70b_lora"), "dgx-h100x8", runs=1, fallback=_no_plan)
    assert r.system.system_name == "My node" and any("also " in n and "dgx-h100x8.yaml" in n for n in r.notes)
    assert systems.source_note("cpu-local") is None  # the shipped file alone: nothing to say


def _no_plan(*_a):
    return {}


def test_an_unknown_name_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLPERF_SYSTEMS_PATH", str(tmp_path / "mine"))
    with pytest.raises(ConfigError) as e:
        systems.load("nowhere-node")
    msg = str(e.value)
    assert "\n" not in msg and "unknown system 'nowhere-node'" in msg
    assert f"looked in {tmp_path / 'systems'}, {tmp_path / 'mine'} ($MLPERF_SYSTEMS_PATH), " in msg
    assert "(shipped)" in msg


def test_list_shows_the_file_of_each_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLPERF_SYSTEMS_PATH", raising=False)
    _write(tmp_path / "systems", "cpu-local", MINE)
    _write(tmp_path / "systems", "broken", "name: broken\n")
    code, out, _ = cli(capsys, "systems", "list", "--json")
    rows = {s["name"]: s for s in yaml.safe_load(out)["systems"]}
    assert code == 0
    assert rows["cpu-local"]["file"] == "systems/cpu-local.yaml" and rows["cpu-local"]["shadows"]
    assert "is required" in rows["broken"]["error"]  # one broken file does not hide the others
    assert rows["dgx-h100x8"]["file"].endswith("systems/dgx-h100x8.yaml")


def test_tuned_config_reuses_a_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "systems", "my-node", MINE + "tuned_config: dgx-h100x1\n")
    bench = benchmarks.get("llama2_70b_lora")
    r = runplans.resolve_runs(bench, "my-node", runs=1, fallback=_no_plan)
    shipped = yaml.safe_load((bench.configs_dir / "dgx-h100x1.yaml").read_text())["config"]
    p = r.plans[0]
    assert {k: p.config[k] for k in shipped} == shipped
    assert {p.provenance[k] for k in shipped} == {"system:dgx-h100x1"}
    assert any("configs/dgx-h100x1.yaml" in s for s in r.sources)
    assert p.disclosure["config_filename"] == "dgx-h100x1.yaml"
    # a config named after the descriptor itself wins over the tuned_config
    (tmp_path / "systems" / "dgx-h100x8.yaml").write_text(
        MINE.replace("name: my-node", "name: dgx-h100x8") + "tuned_config: dgx-h100x1\n"
    )
    r8 = runplans.resolve_runs(bench, "dgx-h100x8", runs=1, fallback=_no_plan)
    assert set(r8.plans[0].provenance.values()) >= {"system:dgx-h100x8"}


def test_an_unknown_tuned_config_is_one_line(tmp_path):
    (tmp_path / "t.yaml").write_text(MINE + "tuned_config: dgx-h100x2\n")
    with pytest.raises(ConfigError) as e:
        systems.load(str(tmp_path / "t.yaml"))
    msg = str(e.value)
    assert "\n" not in msg
    assert "field 'tuned_config': no benchmark ships a config 'dgx-h100x2'" in msg
    assert "shipped: " in msg and "dgx-h100x1" in msg


def test_nodes_runs_a_users_64_node_descriptor_at_16(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(systems.SYSTEMS_DIR / "dgx-h100x64.yaml", tmp_path / "cluster.yaml")
    args = ("run", "llama2_70b_lora", "--system", "cluster.yaml", "--nodes", "16", "--dry-run", "--json")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    doc = yaml.safe_load(out)
    lay = doc["plan"]["layout"]
    assert lay["world_size"] == 128 and doc["plan"]["submission"]["platform"].startswith("16x")
    assert doc["plan"]["provenance"]["context_parallel_size"] == "system:dgx-h100x64"  # its tuned config
    assert any("--nodes 16" in n for n in doc["notes"])
    # filed under its own system name: one system JSON states one node count, and `--resume`
    # reads the name back as the descriptor at 16 nodes
    assert doc["plan"]["submission"]["system"] == "dgx-h100x64-n16"
    back = systems.load("dgx-h100x64-n16")
    assert (back.name, back.nodes, back.export_official()["number_of_nodes"]) == ("dgx-h100x64-n16", 16, "16")
    # an impossible layout at N nodes is the usual one line, exit 2
    code, _, err = cli(capsys, *args[:5], "3", "--dry-run", "--set", "context_parallel_size=5")
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_nodes_is_checked_by_the_option_and_the_launcher(capsys):
    code, _, err = cli(capsys, "run", "gpt3", "--nodes", "0", "--dry-run")
    assert code == 2 and "'--nodes': 0 is not in the range x>=1" in err
    code, _, err = cli(capsys, "run", "gpt3", "--nodes", "2", "--dry-run")  # cpu-local: one host
    assert code == 2 and err.strip() == (
        "error: --nodes 2: system 'cpu-local' starts its ranks with local, which runs on one node; "
        "give --launcher slurm (or a descriptor with launcher: {kind: slurm}) or --nodes 1"
    )


def test_plan_nodes_prices_the_smaller_machine(capsys):
    code, out, err = cli(
        capsys, "plan", "llama2_70b_lora", "--system", "dgx-h100x64", "--nodes", "16", "--json"
    )
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert (doc["hardware"]["nodes"], doc["hardware"]["world"]) == (16, 128)
    assert doc["best"]["layout"]["dp"] * doc["best"]["layout"]["cp"] == 128
    # run mode (--set): the run `mlperf run --nodes 16` would start, its tuned config included
    code, out, err = cli(
        capsys,
        "plan",
        "llama2_70b_lora",
        "--system",
        "dgx-h100x64",
        "--nodes",
        "16",
        "--set",
        "seed_offset=0",
        "--json",
    )
    assert code == 0, err
    best = yaml.safe_load(out)["best"]["layout"]
    assert (best["cp"], best["dp"], best["gbs"]) == (8, 16, 64)
