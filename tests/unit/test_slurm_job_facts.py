"""What a launch promises (harness/run/launch/jobinfo.py), as a submitter meets it:

- the Slurm time limit is per run: a job of N runs asks for N x time_limit_min + setup, a job
  array's task for one run + setup; the script and `--dry-run` print the arithmetic on one line;
- the page cache is dropped by default on GPU systems and not on CPU ones; a node that refuses
  leaves cache_clear false in the run folder, and `mlperf run` (Slurm and local) says so;
- container images: the dry run says what the image must hold and where the code comes from,
  and warns (one line) about an NGC PyTorch tag older than 25.01 (Python < 3.12).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import benchmarks
from harness.run.launch import jobinfo, local, sbatch, slurm

REPO = Path(__file__).resolve().parents[2]
ENTRY = "reference_impls.gpt3"


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    from harness.run import execute

    r = execute.resolve(
        benchmarks.get("gpt3"), "cpu-slurm", runs=1, seed=1, results_dir=tmp_path_factory.mktemp("res")
    )
    return r.plans[0], r.system


def _with(system, accelerator_kind=None, **launcher):
    lc = system.launcher.model_dump()
    lc.update(launcher)
    changes = {"launcher": lc}
    if accelerator_kind:
        changes["accelerator"] = dict(system.accelerator.model_dump(), kind=accelerator_kind)
    return system.with_overrides(**changes)


def _plans(plan, n: int, tag: str):
    return [
        plan.model_copy(update={"run_index": i, "seed": i + 1, "run_dir": f"{plan.run_dir}-{tag}-{i}"})
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "runs,runs_as,minutes,line",
    [
        (
            10,
            "sequence",
            1210,
            "time limit: 10 runs x 120 min + 10 min setup = 1210 min (#SBATCH --time=1210)",
        ),
        (1, "sequence", 130, "time limit: 1 run x 120 min + 10 min setup = 130 min (#SBATCH --time=130)"),
        (
            10,
            "array",
            130,
            "time limit: 10 runs as a job array, each task 1 run x 120 min + 10 min setup = 130 min "
            "(#SBATCH --time=130)",
        ),
    ],
)
def test_time_limit_is_per_run_plus_setup(cpu, runs, runs_as, minutes, line):
    plan, system = cpu
    system = _with(system, time_limit_min=120, runs_as=runs_as)
    assert jobinfo.time_limit(system, runs) == (minutes, line)
    script = sbatch.render(_plans(plan, runs, "t"), system, ENTRY)
    assert f"\n#SBATCH --time={minutes}\n" in script and f"\n# {line}\n" in script


def test_dry_run_prints_the_arithmetic_cache_and_image(tmp_path, mlperf):
    data = yaml.safe_load((REPO / "systems" / "dgx-h100x64.yaml").read_text())
    data["launcher"]["time_limit_min"] = 120
    data["launcher"]["container"]["image"] = "nvcr.io/nvidia/pytorch:24.04-py3"  # Python 3.10
    own = tmp_path / "own.yaml"
    own.write_text(yaml.safe_dump(data))
    r = mlperf(
        "run", "llama2_70b_lora", "--system", str(own), "--runs", "10", "--dry-run",
        "--results-dir", str(tmp_path / "res"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    want = "time limit: 10 runs x 120 min + 10 min setup = 1210 min (#SBATCH --time=1210)"
    assert lines.count(want) == 1 and "#SBATCH --time=1210" in lines
    assert any(ln.startswith("page cache: dropped before each run on every node") for ln in lines)
    image = [ln for ln in lines if ln.startswith("container: nvcr.io/nvidia/pytorch:24.04-py3")]
    assert len(image) == 1 and "Python >= 3.12" in image[0] and "installs nothing" in image[0]
    warn = [ln for ln in lines if ln.startswith("warning: image nvcr.io/nvidia/pytorch:24.04-py3")]
    assert len(warn) == 1 and "Python < 3.12" in warn[0]


@pytest.mark.parametrize(
    "image,old",
    [
        ("nvcr.io/nvidia/pytorch:24.04-py3", True),
        ("nvcr.io#nvidia/pytorch:24.12-py3", True),  # enroot's registry#image form
        ("nvcr.io/nvidia/pytorch:25.01-py3", False),
        ("nvcr.io/nvidia/pytorch:25.11-py3", False),
        ("/scratch/images/mlperf.sqsh", False),  # not an NGC tag: nothing known
    ],
)
def test_old_ngc_images_are_named(image, old):
    assert bool(jobinfo.ngc_python_too_old(image)) is old


def test_shipped_descriptors_name_a_python_312_image_and_drop_caches_on_gpus():
    from harness.resolve import systems

    for path in sorted((REPO / "systems").glob("*.yaml")):
        s = systems.load(str(path))
        if s.launcher.container is not None:
            assert not jobinfo.ngc_python_too_old(s.launcher.container.image), path.name
        assert jobinfo.drop_caches(s) is (s.accelerator.kind == "gpu"), path.name


def test_cache_default_follows_the_accelerator(cpu):
    _, system = cpu  # cpu-slurm says drop_caches: false
    assert not jobinfo.drop_caches(system)
    assert "NOT dropped (launcher.drop_caches: false)" in jobinfo.cache_line(system)
    assert jobinfo.drop_caches(_with(system, "gpu", drop_caches=None))
    unset_cpu = _with(system, drop_caches=None)
    assert not jobinfo.drop_caches(unset_cpu)
    assert "default for CPU systems" in jobinfo.cache_line(unset_cpu)


def test_custom_workdir_says_the_image_code_runs(cpu):
    _, system = cpu
    box = _with(system, container={"image": "img", "workdir": "/workspace"}).launcher.container
    assert "the image's own installed harness runs" in jobinfo.image_lines(box, REPO)[1]
    box = _with(system, container={"image": "img"}).launcher.container
    assert jobinfo.image_lines(box, REPO)[1].startswith(f"container code: this checkout, mounted at {REPO}")


FAKES = {
    "srun": 'while [[ "$1" == --* ]]; do shift; done; exec "$@"\n',
    "scontrol": "echo n1\n",
    "id": "echo 1000\n",  # not root: the script must go through sudo -n
    "sudo": 'echo "sudo $*" >> "$FAKE_OUT"; [ "$1" = -n ] && shift; exec "$@"\n',
    "sysctl": 'echo "sysctl $*" >> "$FAKE_OUT"; exit "$FAKE_SYSCTL_RC"\n',
    "python": 'echo "cleared=$MLPERF_CACHE_CLEARED" >> "$FAKE_OUT"\n',
}


@pytest.mark.parametrize("sysctl_rc,cleared", [(0, "1"), (1, "0")])
def test_a_refused_cache_drop_is_recorded_and_reported(cpu, tmp_path, sysctl_rc, cleared):
    plan, system = cpu
    plan = _plans(plan, 1, f"cache{sysctl_rc}")[0]
    Path(plan.run_dir).mkdir(parents=True)
    script = sbatch.render([plan], _with(system, drop_caches=True), ENTRY, python="python")
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, body in FAKES.items():
        (fake / name).write_text("#!/bin/bash\n" + body)
        (fake / name).chmod(0o755)
    out = tmp_path / "calls"
    env = dict(
        os.environ, PATH=f"{fake}:{os.environ['PATH']}", FAKE_OUT=str(out), FAKE_SYSCTL_RC=str(sysctl_rc),
        SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n1", SLURM_NNODES="1",
    )  # fmt: skip
    (tmp_path / "job.sbatch").write_text(script)
    p = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    calls = out.read_text().splitlines()
    assert "sudo -n sysctl -q -w vm.drop_caches=3" in calls and f"cleared={cleared}" in calls
    assert (Path(plan.run_dir) / jobinfo.CACHE_FILE).read_text().strip() == cleared
    refused = jobinfo.refused_line(Path(plan.run_dir))
    assert bool(refused) is (cleared == "0")


def _squeue(argv, state: str) -> subprocess.CompletedProcess:
    """What squeue prints for job 5 in `state`: any state with `-t all`, else (squeue's default
    filter) only a job that is pending, running or completing; the columns the query asked for."""
    if "-t" not in argv and state in slurm.TERMINAL:
        out = ""
    else:
        out = f"5 {state} 0:09" if "%i %T %M" in argv else state
    return subprocess.CompletedProcess(argv, 0, out, "")


class _Monitor:
    def __init__(self):
        self.said: list[str] = []

    def poll(self, plan):
        pass

    def status(self, plan, text):
        self.said.append(text)

    def finished(self, plan, rc):
        self.said.append(f"finished {rc}")


def test_slurm_run_output_says_the_cache_was_not_dropped(cpu, monkeypatch):
    plan, _ = cpu
    plan = _plans(plan, 1, "follow")[0]
    d = Path(plan.run_dir)
    d.mkdir(parents=True)
    (d / "exit_code").write_text("0\n")
    (d / jobinfo.CACHE_FILE).write_text("0\n")

    def fake_slurm(*argv, check=True, timeout=0):
        if argv[0] == "squeue":
            return _squeue(argv, "COMPLETED")
        return subprocess.CompletedProcess(argv, 0, "JobState=COMPLETED ExitCode=0:0", "")

    monkeypatch.setattr(slurm, "_slurm", fake_slurm)
    mon = _Monitor()
    slurm.SlurmLauncher()._follow("5", [plan], False, mon, drop=True)
    assert sum("page cache NOT dropped" in s for s in mon.said) == 1
    mon = _Monitor()
    slurm.SlurmLauncher()._follow("5", [plan], False, mon, drop=False)  # never asked: no claim
    assert not any("page cache" in s for s in mon.said)


def test_the_final_state_is_read_after_slurm_has_finished_completing_the_job(cpu, monkeypatch):
    """The run's exit code is on disk while Slurm is still COMPLETING the job (KillWait, epilog):
    the last line must carry the job's final state, and the nodes be free when `mlperf run` ends."""
    plan, _ = cpu
    plan = _plans(plan, 1, "completing")[0]
    d = Path(plan.run_dir)
    d.mkdir(parents=True)
    (d / "exit_code").write_text("134\n")
    squeues = iter(["COMPLETING"] * 4)

    def fake_slurm(*argv, check=True, timeout=0):
        if argv[0] == "squeue":
            return _squeue(argv, next(squeues, "FAILED"))
        state = "FAILED" if next(squeues, None) is None else "COMPLETING"
        return subprocess.CompletedProcess(argv, 0, f"JobState={state} ExitCode=134:0", "")

    monkeypatch.setattr(slurm, "POLL_S", 0.0)
    monkeypatch.setattr(slurm, "_slurm", fake_slurm)
    mon = _Monitor()
    slurm.SlurmLauncher()._follow("5", [plan], False, mon)
    assert mon.said[-1] == "slurm job 5 failed (exit 134)", mon.said


def test_local_run_drops_the_cache_and_says_when_refused(cpu, monkeypatch):
    plan, system = cpu
    plan = _plans(plan, 1, "local")[0]
    d = Path(plan.run_dir)
    d.mkdir(parents=True)
    seen = d / "env.txt"

    class Probe(local.LocalLauncher):
        def argv(self, plan, entry):
            code = f"import os; open({str(seen)!r}, 'w').write(os.environ.get('MLPERF_CACHE_CLEARED', '-'))"
            return [sys.executable, "-c", code]

    monkeypatch.setattr(jobinfo, "drop_here", lambda: (False, "sudo: a password is required"))
    mon = _Monitor()
    Probe().run([plan], _with(system, kind="local", drop_caches=True), ENTRY, mon)
    assert seen.read_text() == "0"
    assert (
        mon.said[0] == "page cache NOT dropped (sudo: a password is required); the log says cache_clear false"
    )
    monkeypatch.setattr(jobinfo, "drop_here", lambda: (True, ""))
    mon = _Monitor()
    Probe().run([plan], _with(system, kind="local", drop_caches=True), ENTRY, mon)
    assert seen.read_text() == "1" and mon.said == ["finished 0"]
