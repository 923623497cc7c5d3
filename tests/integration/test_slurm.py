"""The Slurm launcher against a REAL local Slurm (munged + slurmctld + slurmd, .ci/slurm-up.sh;
the two-node cluster when namespaces allow it, see slurm_helpers.py).

    mlperf run gpt3 --system cpu-slurm --runs 1   sbatch -> srun -> torchrun -> 2 gloo ranks
    SIGINT of `mlperf run`                        job cancelled, run_stop aborted, no orphans
    --runs 3                                      ONE allocation, three runs in sequence, a failed
                                                  run doesn't stop the next, three results
    bad input                                     unreachable Slurm, missing partition, shell
                                                  metacharacters: exit 2 with one line
Multi-node (rendezvous across nodes, TP inside / DP across, a node dying): test_slurm_2n.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_helpers
import yaml
from gpt3_helpers import prepared_data_dir
from helpers import events
from power_helpers import loopback_bmc, power_system
from slurm_helpers import processes_mentioning

import benchmarks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def slurm():
    slurm_helpers.cluster()
    yield
    slurm_helpers.stop()


@pytest.fixture(autouse=True)
def _cluster_shared():
    """test_slurm_2n stops and restarts the cluster between these tests, never under one."""
    with slurm_helpers.in_use():
        yield


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data_dir(tmp_path_factory)


def _run_dir(results: Path) -> Path:
    dirs = sorted((results / "runs" / "gpt3" / "cpu-slurm").glob("*"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def _gpt3_on_slurm(seed: int) -> tuple[str, ...]:
    """`mlperf run`'s arguments for one tiny gpt3 run on the one-node Slurm system."""
    return ("run", "gpt3", "--system", "cpu-slurm", "--runs", "1", "--seed", str(seed))


def _job(run_dir: Path) -> dict[str, str]:
    return slurm_helpers.job((run_dir / "slurm_job_id").read_text().strip())


def test_gpt3_tiny_through_sbatch_srun_torchrun(slurm, mlperf, tmp_path, data_dir):
    results = tmp_path / "results"
    t0 = time.monotonic()
    r = mlperf(
        *_gpt3_on_slurm(seed=1),
        "--results-dir",
        str(results),
        "--data-dir",
        str(data_dir),
        timeout=600,
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir = _run_dir(results)
    script = (run_dir / "job.sbatch").read_text()
    assert "python -m torch.distributed.run" in script.replace(sys.executable, "python")
    assert "--nproc-per-node=2" in script and "--rdzv-backend=c10d" in script
    job = _job(run_dir)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job
    assert job["NumNodes"] == "1" and job["Partition"] == "debug"
    assert "slurm job" in r.stderr and "completed" in r.stderr  # progress shows the job's state
    result = results / "MyOrg" / "results" / "cpu-slurm" / "gpt3" / "result_0.txt"
    ev = events(result)
    first = {e["key"]: e for e in reversed(ev)}
    assert first["run_stop"]["metadata"]["status"] == "success"
    assert first["cache_clear"]["value"] is False  # cpu-slurm may not drop the page cache
    assert first["submission_platform"]["value"] == "1xCPU"
    print(f"end-to-end {elapsed:.1f} s; job {job['JobId']} RunTime {job['RunTime']}")

    c = mlperf("check", str(result))
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    yield from loopback_bmc(tmp_path_factory.mktemp("bmc"))


def test_power_mode_samples_inside_the_job_and_a_wrong_password_is_one_line(
    slurm, mlperf, tmp_path, data_dir, bmc
):
    """cpu-slurm with the loopback BMC: the job script starts one sampler per node as an
    `srun --overlap` step (harness/run/power/job.py), trains once every node has read, stops
    them (stop file, then by pid) and the run's power folder holds >= 60 readings of the node
    from inside the job; with a wrong password the job trains nothing and the run's line says why."""
    system = power_system(tmp_path, bmc, base="cpu-slurm", interval_s=0.2)
    argv = ("run", "gpt3", "--system", str(system), "--nproc-per-node", "1", "--runs", "1", "--seed", "1",
            "--results-dir", str(tmp_path / "results"), "--data-dir", str(data_dir), "--json")  # fmt: skip
    r = mlperf(*argv, timeout=600, env=bmc["creds"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (run,) = json.loads(r.stdout)["runs"]
    run_dir = Path(run["run_dir"])
    assert "srun --overlap" in (run_dir / "job.sbatch").read_text()
    node = events(Path(run["result_file"]).parent / "power" / "result_0" / "node_0.txt")
    readings = [e for e in node if e["key"] == "power_reading"]
    assert len(readings) >= 60 and int(run["power"].split()[0]) >= 60, run["power"]
    host = slurm_helpers.job((run_dir / "slurm_job_id").read_text().strip())["NodeList"]
    assert {e["metadata"]["host"] for e in readings} == {host}  # the node's own name, from inside
    assert (run_dir / "power" / "sampler.log").read_text() == ""  # ended by the stop file, not killed
    bad = dict(bmc["creds"], MLPERF_BMC_PASSWORD="wrong")
    r = mlperf(*argv[:-1], timeout=600, env=bad)
    assert r.returncode != 0 and "RMCP+ session" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "results" / "MyOrg" / "results").rglob("result_1.txt"))  # nothing trained


def test_sigint_cancels_the_job_and_logs_aborted(slurm, tmp_path, data_dir):
    """The LR is ~0, so the run cannot reach the target before the signal comes: a tiny run takes
    ~8 s of training, and one that finished first would exit 0 and prove nothing about Ctrl-C."""
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            *_gpt3_on_slurm(seed=2),
            "--set",
            "opt_base_learning_rate=1e-9",
            "--results-dir",
            str(results),
            "--data-dir",
            str(data_dir),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        log = None
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list((results / "runs").glob("gpt3/cpu-slurm/*/mlperf.log"))
            if logs and "run_start" in logs[0].read_text():
                log = logs[0]
                break
            time.sleep(0.1)
        assert log is not None, "training never started"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("error: interrupted"), err[-1000:]
    run_dir = log.parent
    stops = [e for e in events(log) if e["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    job = _job(run_dir)
    assert job["JobState"] in ("CANCELLED", "FAILED", "COMPLETED"), job
    assert (
        subprocess.run(["squeue", "-h", "-j", job["JobId"]], capture_output=True, text=True).stdout.strip()
        == ""
    )
    assert processes_mentioning(str(run_dir)) == []
    print(f"SIGINT -> exit in {stop_s:.1f} s; job {job['JobId']} {job['JobState']} {job['ExitCode']}")


def _descriptor(tmp_path: Path, **launcher) -> Path:
    data = yaml.safe_load((REPO / "systems" / "cpu-slurm.yaml").read_text())
    data["launcher"].update(launcher)
    path = tmp_path / "cpu-slurm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _one_line_error(r, *needles: str) -> None:
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), r.stderr[-2000:]
    for n in needles:
        assert n in last, last
    assert "Traceback" not in r.stderr


def _run_gpt3(mlperf, tmp_path: Path, system: str, *extra: str, env: dict | None = None):
    """`mlperf run gpt3 --system SYSTEM --runs 1`, results under tmp_path/results."""
    args = (
        "run",
        "gpt3",
        "--system",
        system,
        "--runs",
        "1",
        "--results-dir",
        str(tmp_path / "results"),
        *extra,
    )
    return mlperf(*args, env=env)


def test_unreachable_slurm_is_one_line(slurm, mlperf, tmp_path):
    conf = Path("/etc/slurm/slurm.conf").read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
    (tmp_path / "slurm.conf").write_text(conf + "\nMessageTimeout=1\n")
    r = _run_gpt3(mlperf, tmp_path, "cpu-slurm", env={"SLURM_CONF": str(tmp_path / "slurm.conf")})
    _one_line_error(r, "slurm", "not reachable")


def test_slurm_not_installed_is_one_line(slurm, mlperf, tmp_path):
    r = _run_gpt3(mlperf, tmp_path, "cpu-slurm", env={"PATH": str(Path(sys.executable).parent)})
    _one_line_error(r, "not found on PATH")


def test_missing_partition_is_one_line(slurm, mlperf, tmp_path):
    r = _run_gpt3(mlperf, tmp_path, str(_descriptor(tmp_path, partition="nopart")))
    _one_line_error(r, "launcher.partition", "nopart", "does not exist")


def test_shell_metacharacters_are_refused(slurm, mlperf, tmp_path):
    """Every field is covered in tests/unit/test_sbatch_render.py; here the CLI end of it."""
    canary = tmp_path / "pwned"
    system = _descriptor(tmp_path, env={"NCCL_DEBUG": f"INFO$(touch {canary})"})
    for extra in (["--dry-run"], []):
        r = _run_gpt3(mlperf, tmp_path, str(system), *extra)
        _one_line_error(r, "launcher.env.NCCL_DEBUG", "metacharacter")
    assert not canary.exists()
    assert not list((tmp_path / "results").glob("runs/*/*/*/job.sbatch"))


def test_runs_share_one_allocation(slurm, tmp_path, monkeypatch):
    """--runs 3 -> ONE job (sacct -c lists it once) running three runs in sequence, each with its
    own plan, seed, log and result number; run 2 fails and run 3 still runs (a fast torch-free
    entry in place of gpt3's: what is tested here is the sequencing, not the training)."""
    import dataclasses

    from harness.run import execute
    from tests.toy_train import NoData

    gpt3 = benchmarks.get("gpt3")  # every rank runs the torch-free entry, with gpt3's rules and configs
    impl = dataclasses.replace(gpt3.impl, module="tests.integration.slurm_entry", data=NoData(()))
    fast = dataclasses.replace(gpt3, name="slurm_entry", impl=impl)
    system = "cpu-slurm-2n" if len(slurm_helpers.cluster()) >= 2 else "cpu-slurm"
    r = execute.resolve(fast, system, runs=3, seed=100, results_dir=tmp_path)
    r.plans = [
        p if p.run_index != 1 else p.model_copy(update={"config": {**p.config, "global_batch_size": 13}})
        for p in r.plans
    ]
    out = execute.execute(r, tmp_path)
    assert [x.status for x in out] == ["success", "aborted", "success"], out
    assert [x.seed for x in out] == [100, 101, 102]
    assert sorted(Path(x.result_file).name for x in out) == ["result_0.txt", "result_1.txt", "result_2.txt"]
    job_ids = {(Path(p.run_dir) / "slurm_job_id").read_text().strip() for p in r.plans}
    assert len(job_ids) == 1, job_ids
    (job_id,) = job_ids
    script = (Path(r.plans[0].run_dir) / "job.sbatch").read_text()
    assert script.count('run_one "$i"') == 1 and all(p.run_dir in script for p in r.plans)
    for p in r.plans:
        ev = {e["key"]: e for e in events(Path(p.log_path))}
        assert ev["seed"]["value"] == 100 + p.run_index
        assert ev["harness_world"]["value"] == r.plans[0].layout.world_size  # torchrun started them all
        assert ev["harness_world"]["metadata"]["cache_cleared_env"] == "0"
        rc = int((Path(p.run_dir) / "exit_code").read_text())  # written by the job script
        assert (rc == 0) == (p.run_index != 1), (p.run_index, rc)
    # The CI cluster records finished jobs in a text file (jobcomp/filetxt), which `sacct -c` reads.
    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    if "jobcomp/filetxt" not in conf:
        pytest.skip("this cluster keeps no job completion records (JobCompType), so no sacct -c")
    sacct = subprocess.run(
        ["sacct", "-c", "-n", "-X", "-j", job_id, "-o", "JobID,JobName%60,NNodes"],
        capture_output=True,
        text=True,
    )
    rows = [ln.split() for ln in sacct.stdout.splitlines() if ln.strip()]
    assert [row[0] for row in rows] == [job_id], sacct.stdout + sacct.stderr
    assert rows[0][1] == f"mlperf-slurm_entry-{system}-r0-2"
