"""An input named on the command line that is a FIFO or a device is refused with one line (exit 2)
before anything opens it: reading a FIFO blocks until a writer comes (forever, for a mistyped
path), and /dev/zero never ends. Without the check each of these commands hangs, so the subprocess
timeout turns a regression into a failure instead of a stuck CI."""

from __future__ import annotations

import os

import pytest

COMMANDS = [
    ("diagnose", "{f}"),
    ("systems", "validate", "{f}"),
    ("check", "{f}"),
    ("plan", "gpt3", "--system-json", "{f}"),
    ("run", "gpt3", "--system", "{f}", "--dry-run"),
]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "system.yaml"  # a descriptor's suffix: `--system` then takes it as a file
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_fifo_is_refused_in_one_line(mlperf, fifo, args):
    r = mlperf(*(a.format(f=fifo) for a in args), timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip() == r.stderr.strip().splitlines()[0], r.stderr
    assert f"error: {fifo} is not a regular file (a FIFO, socket or device)" in r.stderr, r.stderr


def test_a_device_is_refused_too(mlperf):
    r = mlperf("plan", "gpt3", "--system-json", "/dev/zero", timeout=60)
    assert r.returncode == 2 and "/dev/zero is not a regular file" in r.stderr, r.stderr


def _special(kind: str, path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        cwd = os.getcwd()  # bound by a relative name: a socket path may not exceed 107 bytes
        os.chdir(path.parent)
        try:
            socket.socket(socket.AF_UNIX).bind(path.name)  # the file stays after the socket is gone
        finally:
            os.chdir(cwd)
    else:
        os.symlink("/dev/zero", path)  # a device (endless): what a stray link in a copied tree gives


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_special_files_anywhere_in_a_tree_are_findings_not_hangs(mlperf, tmp_path, kind):
    """A copy of a published v5.1 folder with a special file where each reader looks: a result log,
    a power log, the system-level package_checker_params, a stray systems/ JSON and the org root.
    `check` names each one it would read and exits 4; `results score` skips the log. Before every
    reader opened tree files through core/files.open_input, the FIFO named result_3.txt hung the
    check (core/tree.py reading its header) and the other kinds were read as empty or endless."""
    import json
    import shutil

    from fixtures import fixture_path

    org = tmp_path / "AMD"
    shutil.copytree(fixture_path("rounds/v5.1/AMD"), org)
    system = org / "results" / "MI355X_EPYC_9575F_pytorch"
    (system / "llama31_8b" / "result_3.txt").unlink()
    (system / "llama31_8b" / "power" / "result_0").mkdir(parents=True)
    named = [
        system / "llama31_8b" / "result_3.txt",
        system / "llama31_8b" / "power" / "result_0" / "node_0.txt",
        system / "package_checker_params",
    ]
    for p in [*named, org / "systems" / "other.json", org / "notes.txt"]:
        _special(kind, p)
    r = mlperf("check", str(org), "--round", "v5.1", "--json", timeout=90)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    doc = json.loads(r.stdout)
    files = {f["file"] for f in doc["findings"] + [f for lg in doc["logs"] for f in lg["findings"]]}
    for p in named:
        assert str(p.relative_to(org)) in files, (p, sorted(files))
    r = mlperf("results", "score", str(org), timeout=90)
    assert r.returncode == 0 and "result_3.txt: not counted (not a regular file" in r.stderr, r.stderr[-2000:]
