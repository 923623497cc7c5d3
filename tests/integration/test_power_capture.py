"""MLPerf Power capture for real, on loopback: the BMC .ci/bmc-up.sh starts (pyghmi's IPMI 2.0
server and a Redfish service on 127.0.0.1, the wattage following a file the test rewrites) read
by real clients (Debian's ipmitool, the `redfish` package) through harness/run/power.

Defects each test would catch: a sampler that sleeps a fixed interval (drift; fewer readings), a
stamp from the wrong clock or the BMC's (energy off the analytic value), a window that ends 0.2 s
after its last reading or opens before run_start, credentials accepted whatever they are, a
run that trains on no further after run_stop (fewer than 60 readings: the lint fails), energy
that is not the official summarizer's, a dead sampler that fails the run or leaves half a power
folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from power_helpers import loopback_bmc, power_system

from harness.core.mllog_reader import read_events

pytestmark = pytest.mark.slow  # starts a BMC and training processes

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    yield from loopback_bmc(tmp_path_factory.mktemp("bmc"))


def _system(tmp_path: Path, bmc, interval_s=0.2, source: dict | None = None) -> Path:
    """A power system on this test's BMC. 5 Hz unless the test needs more: ipmitool is a new
    process and an RMCP+ session per reading, and at 20 Hz (a 45 ms answer bound) a busy machine
    missed the first reading, which refuses the run (seen with two CPU burners beside the suite)."""
    return power_system(tmp_path, bmc, interval_s=interval_s, source=source)


def _set_watts(bmc, w: float) -> None:
    tmp = bmc["watts"].with_name("watts.tmp")
    tmp.write_text(str(w))
    os.replace(tmp, bmc["watts"])


def _sample(tmp_path, bmc, power: dict, seconds: float, during=None, creds=None) -> tuple[int, list[dict]]:
    n = len(list(tmp_path.glob("raw*.jsonl")))
    spec, raw = tmp_path / f"power{n}.json", tmp_path / f"raw{n}.jsonl"
    spec.write_text(json.dumps(power))
    env = dict(os.environ, **(bmc["creds"] if creds is None else creds))
    p = subprocess.Popen(
        [sys.executable, "-m", "harness.run.power.sampler", "--spec", str(spec), "--out", str(raw)],
        env=env,
        cwd=REPO,
    )
    try:
        # The window starts at the sampler's first line (a reading, or its one fatal line), not at
        # its start: a busy machine takes over a second to start the interpreter and the client,
        # and a fixed sleep from Popen then stopped it before it had written anything.
        deadline = time.monotonic() + 60
        while p.poll() is None and not (raw.exists() and raw.read_text().strip()):
            assert time.monotonic() < deadline, "the sampler wrote nothing in 60 s"
            time.sleep(0.02)
        if during:
            during(p)
        else:
            time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        p.kill()
    return rc, [json.loads(x) for x in raw.read_text().splitlines()]


def _power(tmp_path, bmc, **kw) -> dict:
    from harness.resolve import systems

    return systems.load(str(_system(tmp_path, bmc, **kw))).power.model_dump()


def test_ipmitool_reads_a_step_profile_on_absolute_deadlines(tmp_path, bmc):
    """10 Hz for ~3 s through a real ipmitool, 1000 W then 2000 W: every reading one of the two, in
    time order, and the right-endpoint integral equal to the analytic energy within one gap's step
    (dP x the widest gap). How many readings fit in 3 s is the machine's (a process and an RMCP+
    session per reading; with two CPU burners beside the suite, 17 of 30 came back): the deadlines
    themselves are proven on a simulated clock (tests/unit/test_power_sampler_deadlines.py)."""
    _set_watts(bmc, 1000)
    switch = {}

    def step(p):
        time.sleep(1.5)
        switch["ms"] = int(time.time() * 1000)
        _set_watts(bmc, 2000)
        time.sleep(1.5)

    rc, lines = _sample(tmp_path, bmc, _power(tmp_path, bmc, interval_s=0.1), 0, during=step)
    assert rc == 0
    got = [(x["t_ms"], x["w"]) for x in lines if "w" in x]
    assert {w for _, w in got} == {1000.0, 2000.0}, got
    t = [a for a, _ in got]
    assert t == sorted(t) and len(set(t)) == len(t)
    energy = sum(w * (b - a) for (a, _), (b, w) in zip(got, got[1:])) / 1000  # J, right-endpoint
    analytic = (1000 * (switch["ms"] - t[0]) + 2000 * (t[-1] - switch["ms"])) / 1000
    widest = max(b - a for a, b in zip(t, t[1:])) / 1000  # s: the gap the switch can fall into
    # dP x (that gap + 50 ms: a reading is stamped after its read, which may straddle the switch)
    assert abs(energy - analytic) <= 1000 * (widest + 0.05), (energy, analytic, widest)


def test_redfish_client_reads_both_resource_shapes_and_wrong_credentials_are_refused(tmp_path, bmc):
    _set_watts(bmc, 1234)
    port = int(bmc["env"]["BMC_CI_REDFISH_PORT"])
    for resource, field in (
        ("/redfish/v1/Chassis/1/Power", "PowerControl/0/PowerConsumedWatts"),
        ("/redfish/v1/Chassis/1/EnvironmentMetrics", "PowerWatts/Reading"),
    ):
        src = {"kind": "redfish", "host": "127.0.0.1", "port": port, "scheme": "http", "resource": resource,
               "field": field, "username_env": "MLPERF_BMC_USER", "password_env": "MLPERF_BMC_PASSWORD",
               "timeout_s": 0.09}  # fmt: skip
        rc, lines = _sample(tmp_path, bmc, _power(tmp_path, bmc, interval_s=0.1, source=src), 1.0)
        assert rc == 0 and len([x for x in lines if x.get("w") == 1234.0]) >= 7, lines
    bad = dict(bmc["creds"], MLPERF_BMC_PASSWORD="wrong")
    rc, lines = _sample(tmp_path, bmc, _power(tmp_path, bmc, interval_s=0.1, source=src), 0.5, creds=bad)
    assert rc == 2 and len(lines) == 1 and "401" in lines[0]["fatal"]


def _toy_run(tmp_path, system: Path, runs: int, creds: dict, **env) -> subprocess.Popen:
    full = dict(os.environ, **creds, TOY_SYSTEM=str(system), TOY_RUNS=str(runs)) | {"TOY_STEP_S": "0", **env}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.toy_run", str(tmp_path / "results")],
        cwd=REPO,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_wrong_bmc_password_refuses_the_run_in_one_line_before_training(tmp_path, bmc):
    p = _toy_run(tmp_path, _system(tmp_path, bmc), 1, dict(bmc["creds"], MLPERF_BMC_PASSWORD="wrong"))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: power: node 0 (ipmi lanplus 127.0.0.1")
    assert "RMCP+" in lines[0] and "Traceback" not in err
    assert not list((tmp_path / "results").rglob("mlperf.log"))  # nothing trained


def test_gpt3_three_power_runs_train_on_pass_check_and_score_the_summarizers_energy(
    tmp_path, tmp_path_factory, bmc, mlperf
):
    """The issue's command, `mlperf run gpt3 --system cpu-local-power --runs 3`, on this test's
    BMC port (5 Hz as shipped; 10 Hz saved ~18 CPU-s but its 90 ms answer bound missed the first
    reading on a loaded machine, which refuses the run: seen 2026-12-06 in a fresh clone with a
    stray CPU hog beside the suite): each ~6 s run reaches its target, logs run_stop, and trains on
    (same blocks and evals) until 60 readings exist where it had fewer (the toy's runs below
    always do: they are ~1 s); the tree passes `mlperf check` with the power
    lint, and `mlperf results score` gives the energy of the official summarizer's own functions
    (result_summarizer._compute_total_power, olympic over the 3 runs) on the same tree."""
    from gpt3_helpers import prepared_data_dir
    from mlperf_logging.result_summarizer import result_summarizer as rs

    _set_watts(bmc, 1000)
    res = tmp_path / "results"
    system = _system(tmp_path, bmc, interval_s=0.2)
    r = mlperf("run", "gpt3", "--system", str(system), "--runs", "3", "--seed", "3", "--results-dir", str(res),
               "--data-dir", str(prepared_data_dir(tmp_path_factory)), "--json", env=bmc["creds"])  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    runs = json.loads(r.stdout)["runs"]
    folder = Path(runs[0]["result_file"]).parent
    for k, run in enumerate(runs):
        log = read_events(folder / f"result_{k}.txt")
        keys = [e["key"] for e in log]
        start, stop = (
            next(e["time_ms"] for e in log if e["key"] == key) for key in ("run_start", "run_stop")
        )
        before = [e["value"] for e in log[: keys.index("run_stop")] if e["key"] == "eval_accuracy"]
        assert run["quality"]["log_perplexity"] == before[-1]  # the result is the eval at run_stop
        assert int(run["power"].split()[0]) >= 60, run["power"]
        assert "; node 0: " in run["power"]  # NVML: its GPUs' energy, or why there is none
        node = read_events(folder / "power" / f"result_{k}" / "node_0.txt")
        readings = [e["time_ms"] for e in node if e["key"] == "power_reading"]
        # Trains on after run_stop exactly when the run alone was too short for 60 readings: how
        # fast this machine ran it decides which (a quiet box: ~9 s, 45 readings; a busy one can
        # pass 60). The reading that lands between run_stop and the loop's check is the margin.
        by_stop = sum(start <= t <= stop for t in readings)
        trained_on = "eval_accuracy" in keys[keys.index("run_stop") :]
        if by_stop < 59:
            assert trained_on, (by_stop, keys[keys.index("run_stop") :])
        elif by_stop >= 60:
            assert not trained_on, by_stop  # the extension stops at the first check
        assert sum(t >= start for t in readings) >= 60 and readings[0] <= start and readings[-1] > stop
        assert node[0]["time_ms"] == readings[0] and node[-1]["time_ms"] == readings[-1]  # window = readings
    check = mlperf("check", str(res), "--json")
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    score = mlperf("results", "score", str(res), "--json")
    assert score.returncode == 0, score.stderr
    (row,) = json.loads(score.stdout)["results"]
    per_run = []
    for k in range(3):
        log = str(folder / f"result_{k}.txt")
        ev = {e["key"]: e["time_ms"] for e in read_events(log) if e["key"] in ("run_start", "run_stop")}
        ttt = ev["run_stop"] - ev["run_start"]
        per_run.append((ttt, rs._compute_total_power(str(folder), log, ttt, "4.1.0")))
    official = sorted(per_run)[1][1]  # the olympic mean of 3: the run between the fastest and slowest
    assert row["energy_j"] == pytest.approx(official, rel=1e-9)
    assert official == pytest.approx((1000 * 0.94 + 50) * sorted(per_run)[1][0] / 1000, rel=0.02)


def _sampler_of(driver):
    """The driver's one sampler process (its short-lived ipmitool children come and go meanwhile).
    A child caught between fork and exec still shows the sampler's command line, so the sampler is
    the match whose parent is not itself a match."""
    import psutil

    found = {}
    for c in driver.children(recursive=True):
        try:
            if "harness.run.power.sampler" in c.cmdline():
                found[c.pid] = (c, c.ppid())
        except (psutil.Error, OSError):  # exited while we looked: an ipmitool call
            continue
    (sampler,) = [c for c, parent in found.values() if parent not in found]
    return sampler


def _training_with_its_sampler(tmp_path, bmc, steps: int):
    """A one-run toy power run at 10 Hz, once it trains (after run_start); (driver, its sampler)."""
    import psutil

    ready = tmp_path / "ready"
    p = _toy_run(tmp_path, _system(tmp_path, bmc, interval_s=0.1), 1, bmc["creds"],
                 TOY_STEPS=str(steps), TOY_STEP_S="0.01", TOY_READY_FILE=str(ready))  # fmt: skip
    end = time.monotonic() + 120
    while not ready.exists():
        assert p.poll() is None and time.monotonic() < end, p.communicate()
        time.sleep(0.05)
    return p, _sampler_of(psutil.Process(p.pid))


def test_a_sampler_killed_mid_run_leaves_the_result_claimed_without_energy(tmp_path, bmc):
    p, sampler = _training_with_its_sampler(tmp_path, bmc, steps=200)
    sampler.kill()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)  # the run itself succeeds
    (run,) = json.loads(out.strip().splitlines()[-1])
    assert run["status"] == "success" and Path(run["result_file"]).exists()
    assert "power sampler of node 0 died during the run (exit -9" in run["power"]
    assert run["power"].endswith("result claimed without energy")
    assert not (Path(run["result_file"]).parent / "power").exists()


def test_a_whole_run_reads_a_redfish_source(tmp_path, bmc):
    """A run (the toy, training on to the minimum) whose system reads power over Redfish instead of
    IPMI: the same capture, window and power folder, every reading the BMC's 1234 W. Fails if the
    run path only works with ipmitool (a sampler argument, a session left open that the BMC then
    refuses, a reading parsed from the wrong field)."""
    _set_watts(bmc, 1234)
    src = {"kind": "redfish", "host": "127.0.0.1", "port": int(bmc["env"]["BMC_CI_REDFISH_PORT"]),
           "scheme": "http", "resource": "/redfish/v1/Chassis/1/EnvironmentMetrics", "field": "PowerWatts/Reading",
           "username_env": "MLPERF_BMC_USER", "password_env": "MLPERF_BMC_PASSWORD", "timeout_s": 0.045}  # fmt: skip
    # 20 Hz: the toy trains on to 60 readings in 3 s (in-process HTTP reads, no process per reading)
    p = _toy_run(
        tmp_path, _system(tmp_path, bmc, interval_s=0.05, source=src), 1, bmc["creds"], TOY_STEPS="20"
    )
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    (run,) = json.loads(out.strip().splitlines()[-1])
    assert int(run["power"].split()[0]) >= 60, run["power"]
    node = read_events(Path(run["result_file"]).parent / "power" / "result_0" / "node_0.txt")
    watts = [e["value"] for e in node if e["key"] == "power_reading"]
    assert len(watts) >= 60 and set(watts) == {1234.0}, watts[:5]


def test_a_run_too_short_for_the_minimum_without_training_on_is_claimed_without_energy(tmp_path, bmc):
    """A loop that ends at run_stop (gnn, llama2, SD; here the toy with its extension off) and a
    run of ~1 s at 5 readings a second: fewer than 60 readings, so no power folder (the power
    check would fail it) and one line with the count. Fails if files.write writes the short
    window anyway, or if the run itself is refused or failed for it."""
    p = _toy_run(
        tmp_path, _system(tmp_path, bmc), 1, bmc["creds"], TOY_STEPS="20", TOY_NO_POWER_EXTENSION="1"
    )
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    (run,) = json.loads(out.strip().splitlines()[-1])
    assert run["status"] == "success" and Path(run["result_file"]).exists()
    assert (
        run["power"].startswith("only ")
        and "(the rules need 60; its training loop does not train on" in run["power"]
    ), run["power"]
    assert run["power"].endswith("result claimed without energy")
    assert not (Path(run["result_file"]).parent / "power").exists()


def test_ctrl_c_of_a_power_run_leaves_no_sampler_behind(tmp_path, bmc):
    """SIGINT to `mlperf run` (the toy driver takes the CLI's path): the run stops at a step
    boundary (exit 130) and its sampler is stopped by pid on the way out (the launcher's `with`)."""
    import psutil

    p, sampler = _training_with_its_sampler(tmp_path, bmc, steps=100000)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    assert not sampler.is_running() or sampler.status() == psutil.STATUS_ZOMBIE
