"""The sbatch renderer (harness/run/launch/sbatch.py) without a cluster.

- `mlperf run gpt3 --system dgx-h100x1452 --dry-run` prints the script for 1452 nodes x 8 GPUs
  with the record layout; dgx-h100x64 with its container (pyxis) and without one: compared to
  tests/golden/*.sbatch (paths normalised; UPDATE_GOLDEN=1 rewrites the files).
- The container flags are the ones pyxis documents, in its documented value formats.
- The rendered script really runs under bash with fake `srun`/`scontrol`/`sysctl`/`nvidia-smi`/
  `python` on PATH: cache drop -> MLPERF_CACHE_CLEARED 1/0, tuning only with --apply-tuning,
  rack-ordered hostfile and node ranks, descriptor values reach the ranks literally, N runs in
  one allocation (a failed run doesn't stop the next; a trapped SIGINT starts no further run),
  one run per job-array task.
- Shell metacharacters in any descriptor field are refused, naming the field.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import benchmarks
from harness.core.errors import ConfigError
from harness.run.launch import jobinfo, sbatch, topology
from harness.run.launch.slurm import SlurmLauncher

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
ENTRY = "reference_impls.gpt3"


def _dry_run(mlperf, tmp_path, system: str) -> str:
    """The --dry-run script with the machine's paths replaced by placeholders."""
    r = mlperf(
        "run",
        "gpt3",
        "--system",
        system,
        "--dry-run",
        "--json",
        "--seed",
        "1",
        "--results-dir",
        str(tmp_path / "results"),
        "--data-dir",
        str(tmp_path / "data"),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["launcher"] == "slurm"
    assert not (tmp_path / "results").exists()  # --dry-run writes and submits nothing
    first = doc["plan"]["run_dir"]  # .../<stamp>-<pid>-0; the other runs differ in the index
    return (
        doc["launch"]
        .replace(first.removesuffix("-0"), "<RUNS>/<ID>")
        .replace(str(Path(first).parent), "<RUNS>")
        .replace(doc["plan"]["data_dir"], "<DATA_DIR>")
        .replace(sys.executable, "<PYTHON>")
        .replace(str(REPO), "<REPO>")
    )


def _golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_dry_run_1452_nodes_matches_golden(mlperf, tmp_path):
    text = _dry_run(mlperf, tmp_path, "dgx-h100x1452")
    assert "#SBATCH --nodes=1452\n" in text and "--nproc-per-node=8 " in text
    assert "#SBATCH --gpus-per-node=8\n" in text
    assert "TP 4 x PP 6 (VP 8) x CP 1 x DP 484; GBS 2904 = DP 484 x MBS 1 x GA 6" in text  # record layout
    assert (
        "#   nvidia-smi boost-slider --vboost 1" in text
        and '\nsrun --ntasks="$SLURM_NNODES" --ntasks-per-node=1 nvidia-smi' not in text
    )
    _golden("gpt3_dgx-h100x1452.sbatch", text)


def test_dry_run_64_nodes_with_and_without_container(mlperf, tmp_path):
    with_container = _dry_run(mlperf, tmp_path, "dgx-h100x64")
    assert "--container-image=nvcr.io/nvidia/pytorch:25.11-py3" in with_container
    _golden("gpt3_dgx-h100x64_container.sbatch", with_container)
    data = yaml.safe_load((REPO / "systems" / "dgx-h100x64.yaml").read_text())
    del data["launcher"]["container"]
    bare = tmp_path / "dgx-h100x64.yaml"
    bare.write_text(yaml.safe_dump(data))
    without = _dry_run(mlperf, tmp_path, str(bare))
    assert (
        "--container" not in without and "<PYTHON> -m torch.distributed.run" in without
    )  # the host's python
    _golden("gpt3_dgx-h100x64.sbatch", without)


# pyxis' srun options as its documentation lists them (github.com/NVIDIA/pyxis wiki "Usage",
# `srun --help` with the plugin loaded); value formats from the same page.
PYXIS_OPTIONS = {
    "container-image", "container-mounts", "container-workdir", "container-name", "container-save",
    "container-mount-home", "no-container-mount-home", "container-remap-root",
    "no-container-remap-root", "container-entrypoint", "no-container-entrypoint",
    "container-entrypoint-log", "container-writable", "container-readonly", "container-env",
}  # fmt: skip


def _pyxis_mount_ok(entry: str) -> bool:
    """SRC:DST[:FLAGS]: SRC a path (or tmpfs/umount), DST a path, flags joined by '+'."""
    parts = entry.split(":")
    if not 1 <= len(parts) <= 3:
        return False
    src, dst = parts[0], parts[1] if len(parts) > 1 else parts[0]
    flags = parts[2].split("+") if len(parts) == 3 else []
    return (
        (src[:1] in "/." and src != "" or src in ("tmpfs", "umount")) and dst[:1] in ("/", ".") and all(flags)
    )


def test_container_flags_are_pyxis_options(cpu_plan):
    plan, system = cpu_plan
    box = {
        "image": "nvcr.io/nvidia/pytorch:24.04-py3",
        "mounts": ["/lustre/data:/data:ro+rprivate", "/scratch"],
    }
    script = sbatch.render([plan], _system(system, container=box), ENTRY)
    argv = shlex.split(script[script.index("srun --ntasks") : script.index(" -m torch.distributed.run")])
    flags = dict(a[2:].split("=", 1) for a in argv if a.startswith("--container"))
    assert set(flags) <= PYXIS_OPTIONS and set(flags) == {
        "container-image",
        "container-mounts",
        "container-workdir",
    }
    assert flags["container-image"] == box["image"]
    mounts = flags["container-mounts"].split(",")
    assert all(_pyxis_mount_ok(m) for m in mounts), mounts
    assert (
        mounts[-2:] == box["mounts"]
        and f"{REPO}:{REPO}" in mounts
        and f"{plan.data_dir}:{plan.data_dir}" in mounts
    )
    assert f"{Path(plan.run_dir).parent}:{Path(plan.run_dir).parent}" in mounts  # every run folder
    assert flags["container-workdir"] == str(REPO)
    assert "\n    python -m torch.distributed.run" in script  # the image's python
    custom = sbatch.render([plan], _system(system, container={**box, "workdir": "/workspace"}), ENTRY)
    assert "--container-workdir=/workspace " in custom


@pytest.mark.parametrize(
    "mounts,why",
    [
        (["data:/data"], "source must be a path"),
        (["/a:b"], "target must be a path"),
        (["/a:/b:ro+"], "bad flags"),
        (["/a:/b,/c:/d"], "without ','"),
    ],
)
def test_bad_pyxis_mounts_are_refused(cpu_plan, mounts, why):
    plan, system = cpu_plan
    with pytest.raises(ConfigError) as e:
        sbatch.render([plan], _system(system, container={"image": "img", "mounts": mounts}), ENTRY)
    assert "launcher.container.mounts[0]" in str(e.value) and why in str(e.value)


# ---- the script under bash with fakes ------------------------------------------------------
FAKES = {
    "srun": """opts=(); while [[ "$1" == --* ]]; do opts+=("$1"); shift; done
echo "srun ${opts[*]} :: $1" >> "$FAKE_OUT"
SLURM_PROCID=1 exec "$@"
""",
    "scontrol": 'printf "%s\\n" $FAKE_HOSTS\n',
    "sysctl": 'echo "sysctl $*" >> "$FAKE_OUT"; exit "${FAKE_SYSCTL_RC:-0}"\n',
    # Not root: the script drops the cache through `sudo -n`; never the real sudo in a test.
    "sudo": '[ "$1" = -n ] && shift; exec "$@"\n',
    "nvidia-smi": 'echo "nvidia-smi $*" >> "$FAKE_OUT"\n',
    "python": 'echo "python rank=${PET_NODE_RANK:-} cleared=$MLPERF_CACHE_CLEARED master=$MASTER_ADDR:$MASTER_PORT '
    'weird=${WEIRD:-} args=$*" >> "$FAKE_OUT"\n'
    # The exit code FAKE_RC gives this run's folder; INT = signal the batch shell (our parent:
    # the fake srun exec'd us), as `scancel --batch --signal=INT` would.
    "for a; do case $a in */plan.json) d=${a%/plan.json};; esac; done\n"
    'rc=$(awk -v d="$d" \'$1 == d { print $2 }\' "$FAKE_RC")\n'
    '[ "$rc" = INT ] && { kill -INT "$PPID"; exit 130; }\n'
    'exit "${rc:-0}"\n',
}


@pytest.fixture(scope="module")
def cpu_plan(tmp_path_factory):
    from harness.run import execute as runner

    r = runner.resolve(
        benchmarks.get("gpt3"), "cpu-slurm", runs=1, seed=1, results_dir=tmp_path_factory.mktemp("res")
    )
    return r.plans[0], r.system


def _system(system, **launcher):
    lc = system.launcher.model_dump()
    lc.update(launcher)
    return system.with_overrides(launcher=lc)


def _execute(
    tmp_path, script: str, hosts="n1 n2 n3 n4", sysctl_rc=0, python_rc=None, env=None, rc=0
) -> tuple[list[str], str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name, body in FAKES.items():
        (fake / name).write_text("#!/bin/bash\n" + body)
        (fake / name).chmod(0o755)
    out = tmp_path / "calls.txt"
    out.write_text("")
    rcs = tmp_path / "python_rc.txt"
    rcs.write_text("".join(f"{d} {rc}\n" for d, rc in (python_rc or {}).items()))
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    env = dict(
        os.environ,
        PATH=f"{fake}:{os.environ['PATH']}",
        FAKE_OUT=str(out),
        FAKE_HOSTS=hosts,
        FAKE_SYSCTL_RC=str(sysctl_rc),
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="n[1-4]",
        SLURM_NNODES=str(len(hosts.split())),
        FAKE_RC=str(rcs),
        **(env or {}),
    )
    p = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert p.returncode == rc, p.stderr
    return out.read_text().splitlines(), p.stderr


def _run_dir_exists(plan):
    Path(plan.run_dir).mkdir(parents=True, exist_ok=True)


def test_cache_drop_is_logged_truthfully(cpu_plan, tmp_path):
    plan, system = cpu_plan
    _run_dir_exists(plan)
    script = sbatch.render([plan], _system(system, drop_caches=True), ENTRY, python="python")
    calls, _ = _execute(tmp_path, script, hosts="n1", sysctl_rc=0)
    assert "sysctl -q -w vm.drop_caches=3" in calls
    assert [c for c in calls if c.startswith("python")][0].split()[2] == "cleared=1"
    calls, err = _execute(tmp_path, script, hosts="n1", sysctl_rc=1)
    assert [c for c in calls if c.startswith("python")][0].split()[2] == "cleared=0"
    assert "could not drop the page cache" in err
    # not allowed: never tried, logged false
    calls, _ = _execute(tmp_path, sbatch.render([plan], system, ENTRY, python="python"), hosts="n1")
    assert not any(c.startswith("sysctl") for c in calls)
    assert [c for c in calls if c.startswith("python")][0].split()[2] == "cleared=0"


def test_node_tuning_runs_only_with_apply_tuning(cpu_plan, tmp_path):
    plan, system = cpu_plan
    _run_dir_exists(plan)
    sys_t = _system(system, node_tuning=["nvidia-smi boost-slider --vboost 1"])
    shown = sbatch.render([plan], sys_t, ENTRY, python="python")
    assert "#   nvidia-smi boost-slider --vboost 1" in shown
    calls, _ = _execute(tmp_path, shown, hosts="n1")
    assert not any(c.startswith("nvidia-smi") for c in calls)
    applied = sbatch.render([plan], sys_t, ENTRY, apply_tuning=True, python="python")
    calls, _ = _execute(tmp_path, applied, hosts="n1")
    assert "nvidia-smi boost-slider --vboost 1" in calls
    assert (
        calls.index("nvidia-smi boost-slider --vboost 1")
        < [i for i, c in enumerate(calls) if c.startswith("python")][0]
    )


def test_racks_order_hosts_and_node_ranks(cpu_plan, tmp_path):
    plan, system = cpu_plan
    _run_dir_exists(plan)
    racks = [["n3", "n4"], ["n1"], ["x9"]]
    script = sbatch.render([plan], _system(system, racks=racks, switches=2), ENTRY, python="python")
    assert "#SBATCH --switches=2\n" in script
    calls, _ = _execute(tmp_path, script)
    hostfile = (Path(plan.run_dir) / "hostfile").read_text().split()
    assert hostfile == ["n3", "n4", "n1", "n2"] == topology.order_hosts(["n1", "n2", "n3", "n4"], racks)
    train = [c for c in calls if c.startswith("srun") and "--kill-on-bad-exit=1" in c][0]
    assert "--distribution=arbitrary" in train
    py = [c for c in calls if c.startswith("python")][0]
    assert "rank=1 " in py and "master=n3:" in py and "--master-addr=n3" in py and "rdzv-backend" not in py


def test_values_reach_the_ranks_literally(cpu_plan, tmp_path):
    plan, system = cpu_plan
    _run_dir_exists(plan)
    weird = "a  b * {x,y} ~ # ! ^=%"
    script = sbatch.render([plan], _system(system, env={"WEIRD": weird}), ENTRY, python="python")
    calls, _ = _execute(tmp_path, script, hosts="n1")
    py = [c for c in calls if c.startswith("python")][0]
    assert f"weird={weird} args=" in py
    assert "master=n1:" + str(20000 + 4242 * 16 % 20000) in py
    assert "--nproc-per-node=2" in py and f"--plan {plan.run_dir}/plan.json" in py


@pytest.mark.parametrize(
    "field,value,name",
    [
        ("partition", "debug;touch x", "launcher.partition"),
        ("account", "acct$(id)", "launcher.account"),
        ("container", {"image": "img`id`"}, "launcher.container.image"),
        ("container", {"image": "i", "mounts": ["/a:/b", "/c:/d;id"]}, "launcher.container.mounts[1]"),
        ("container", {"image": "i", "workdir": "/w$(id)"}, "launcher.container.workdir"),
        ("env", {"NCCL_DEBUG": "INFO\nid"}, "launcher.env.NCCL_DEBUG"),
        ("env", {"BAD-NAME": "1"}, "launcher.env key"),
        ("node_tuning", ["nvidia-smi && reboot"], "launcher.node_tuning[0]"),
        ("racks", [["n1", "n2|id"]], "launcher.racks[0]"),
    ],
)
def test_metacharacters_are_refused(cpu_plan, field, value, name):
    plan, system = cpu_plan
    with pytest.raises(ConfigError) as e:
        sbatch.render([plan], _system(system, **{field: value}), ENTRY)
    msg = str(e.value)
    assert name in msg and "\n" not in msg.replace("'\\n'", "")


def _runs(plan, n: int, tag: str):
    """n plans like `plan`, their run folders (new ones, named after the test) created."""
    plans = [
        plan.model_copy(
            update={"run_index": i, "seed": plan.seed + i, "run_dir": f"{plan.run_dir}-{tag}-{i}"}
        )
        for i in range(n)
    ]
    for p in plans:
        _run_dir_exists(p)
    return plans


def test_runs_in_one_allocation_go_on_after_a_failure(cpu_plan, tmp_path):
    plan, system = cpu_plan
    plans = _runs(plan, 3, "fail")
    script = sbatch.render(plans, system, ENTRY, python="python")
    assert "#SBATCH --job-name=mlperf-gpt3-cpu-slurm-r0-2\n" in script
    # three runs' worth plus the job's setup (jobinfo.time_limit)
    assert f"#SBATCH --time={3 * system.launcher.time_limit_min + jobinfo.SETUP_MIN}\n" in script
    calls, _ = _execute(tmp_path, script, hosts="n1", python_rc={plans[1].run_dir: 7}, rc=7)
    runs = [c for c in calls if c.startswith("python")]
    assert len(runs) == 3 and all(f"--plan {p.run_dir}/plan.json" in r for p, r in zip(plans, runs))
    ports = {r.split("master=")[1].split()[0] for r in runs}
    assert len(ports) == 3  # a fresh rendezvous port per run
    assert [(Path(p.run_dir) / "exit_code").read_text().strip() for p in plans] == ["0", "7", "0"]


def test_sigint_to_the_batch_shell_starts_no_further_run(cpu_plan, tmp_path):
    plan, system = cpu_plan
    plans = _runs(plan, 3, "sigint")
    script = sbatch.render(plans, system, ENTRY, python="python")
    # The fake python of run 1 signals the batch shell (what `scancel --batch --signal=INT` does).
    calls, _ = _execute(tmp_path, script, hosts="n1", python_rc={plans[0].run_dir: "INT"}, rc=130)
    runs = [c for c in calls if c.startswith("python")]
    assert len(runs) == 1 and (Path(plans[0].run_dir) / "exit_code").exists()
    assert not (Path(plans[1].run_dir) / "exit_code").exists()


def test_job_array_task_runs_its_own_run(cpu_plan, tmp_path):
    plan, system = cpu_plan
    plans = _runs(plan, 3, "array")
    script = sbatch.render(plans, _system(system, runs_as="array"), ENTRY, python="python")
    assert (
        "#SBATCH --array=0-2\n" in script
        and f"#SBATCH --time={system.launcher.time_limit_min + jobinfo.SETUP_MIN}\n" in script
    )
    assert "slurm-%A_%a.out" in script
    calls, _ = _execute(tmp_path, script, hosts="n1", env={"SLURM_ARRAY_TASK_ID": "1"})
    runs = [c for c in calls if c.startswith("python")]
    assert len(runs) == 1 and f"--plan {plans[1].run_dir}/plan.json" in runs[0]
    assert [(Path(p.run_dir) / "exit_code").exists() for p in plans] == [False, True, False]
    assert SlurmLauncher().describe(plans, system, ENTRY) == sbatch.render(plans, system, ENTRY)


@pytest.mark.parametrize("sampler", ["per-node", "central"])
def test_power_samplers_are_started_before_training_and_stopped_after(cpu_plan, sampler):
    """per-node: one `srun --overlap` step (a task per node); central: one process per node in the
    batch shell. Either way: the wait before the training srun, the stop file and the kill by pid
    after it, and nothing of it without a power: block. (Run for real: tests/integration/test_slurm.py.)"""
    plan, system = cpu_plan
    power = yaml.safe_load((REPO / "systems/cpu-local-power.yaml").read_text())["power"] | {
        "sampler": sampler
    }
    script = sbatch.render([plan], system.with_overrides(power=power), ENTRY, python="python")
    train = script.index("--kill-on-bad-exit=1")
    assert script.index("harness.run.power.job wait") < train < script.index("harness.run.power.job stop")
    assert script.index("harness.run.power.job stop") < script.index('touch "$RUN_DIR/power/stop"')
    assert 'kill -TERM "${SAMPLERS[@]}"' in script
    assert ("srun --overlap" in script) == (sampler == "per-node")
    assert ("SAMPLERS+=($!)" in script) == (sampler == "central")
    assert "harness.run.power" not in sbatch.render([plan], system, ENTRY, python="python")
