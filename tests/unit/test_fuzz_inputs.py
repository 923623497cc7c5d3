"""Property-based test of the bad-input contract (README "Exit codes"; issue 22): every read path
of the CLI, given a mutated copy of a valid input, exits 0, 2, 3 or 4, never prints a traceback,
ends stderr with one `error:` line when it fails, and leaves the folder it read as it was.

Mutations (hypothesis, bounded in examples, no deadline): a value of the parsed document replaced
by another type (None, bool, a 70-bit integer, NaN/inf, text, a list, an object, 400 digits, a bare
integer of 5,000 digits), the
text truncated at any byte, re-encoded as UTF-16, a key written twice. Read paths: a system YAML
(`systems validate`), an official system JSON (`plan --system-json`), an MLLOG log (`check`),
(`check`, `diagnose`, `results score` of its tree), a run folder's plan.json / timings / checkpoint
manifest (`diagnose`, `run --resume --dry-run`), a --set value.
The CLI runs in-process (harness.cli.main). CI runs 60 derandomized examples per read path (the
same ones every run, ~15 s); explore with more, e.g. max_examples=150 and derandomize=False
(three such runs, ~30 s each, found nothing more after the two fixes below).

Found when first run (each now a named test in tests/unit/test_cli.py or below): a system YAML
whose `description` is a string (ValueError in resolve/systems.py before validation); a plan.json
whose system name is 400 characters (OSError "File name too long" for systems/<name>.yaml); a log
line whose `metadata` is null (AttributeError in diagnose); a benchmark name holding U+0085, which
split the `error:` line in two (quoted values are now escaped).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import make_plan
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import cli
from harness.core.checkpoint_manifest import FORMAT, MANIFEST, VERSION, rank_file, step_dir
from harness.core.files import sha256_file
from harness.core.runfolder import checkpoint_root

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "tests" / "data" / "tiny_tree" / "MyOrg"
LOG = TREE / "results" / "cpu-local" / "gpt3" / "result_0.txt"
FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.just("9" * 400),
    st.just("__HUGE__"),  # written as a bare integer of 5,000 digits (over Python's 4,300-digit limit)
)
HUGE = "9" * 5000


def _dump(doc, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc).replace('"__HUGE__"', HUGE)
    return yaml.safe_dump(doc).replace("__HUGE__", HUGE)


def _main(*argv: str) -> tuple[int, str]:
    """`mlperf ARGV` in this process: (exit code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(list(argv))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, err.getvalue()


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode() + (p.read_bytes() if p.is_file() else b"/"))
    return h.hexdigest()


def _holds(root: Path, *argv: str) -> None:
    before = _digest(root)
    code, err = _main(*argv)
    assert code in (0, 2, 3, 4), (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    if code:
        lines = [x for x in err.splitlines() if x.strip()]
        assert lines and lines[-1].startswith("error: "), err[-2000:]
    assert _digest(root) == before, "a read-only command changed what it read"


def _paths(doc, prefix=()):
    """Every (path) to a value in a parsed JSON/YAML document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, text: str, fmt: str) -> bytes:
    """A valid document's text, broken one way."""
    how = draw(st.sampled_from(["value", "value", "truncate", "utf16", "duplicate", "binary"]))
    if how == "binary":  # not text at all (a core dump saved under the name)
        return draw(st.binary(min_size=1, max_size=64))
    if how == "truncate":
        raw = text.encode()
        return raw[: draw(st.integers(min_value=0, max_value=len(raw) - 1))]
    if how == "utf16":
        return text.encode("utf-16")
    doc = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    if how == "duplicate" and isinstance(doc, dict) and doc:
        key = draw(st.sampled_from(sorted(doc, key=str)))
        dup = _dump({key: draw(VALUES)}, fmt)
        dup = dup.strip()[1:-1] if fmt == "json" else dup
        if fmt == "json":
            return (text.rstrip().rstrip("}") + ", " + dup + "}").encode()
        return (text + "\n" + dup).encode()
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths))
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = draw(VALUES)
    return _dump(doc, fmt).encode()


# --- the inputs -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    assert _main("systems", "export", "dgx-h100x8", "-o", str(d / "dgx-h100x8.json"))[0] == 0
    return d


def _run_folder(root: Path) -> Path:
    """A killed gpt3 run: plan.json, its log so far, timings, one good checkpoint."""
    plan = make_plan("gpt3", root, seed=1)
    run = Path(plan.run_dir)
    lines = [x for x in LOG.read_text().splitlines() if '"run_stop"' not in x]
    Path(plan.log_path).write_text("\n".join(lines) + "\n")
    rows = [{"step": i, "step_time_s": 0.03, "data_wait_s": 0.001, "samples": 16} for i in range(1, 30)]
    (run / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ckpt = step_dir(checkpoint_root(run), 24)
    ckpt.mkdir(parents=True)
    (ckpt / rank_file(0)).write_bytes(b"state")
    files = {rank_file(0): {"bytes": 5, "sha256": sha256_file(ckpt / rank_file(0))}}
    (ckpt / MANIFEST).write_text(
        json.dumps({"format": FORMAT, "version": VERSION, "step": 24, "world_size": 1, "files": files})
    )
    return run


def _fresh(work: Path, name: str) -> Path:
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    return d


@FUZZ
@given(data=st.data())
def test_system_yaml(work, data):
    d = _fresh(work, "yaml")
    f = d / "sys.yaml"
    f.write_bytes(data.draw(mutated((REPO / "systems" / "dgx-h100x8.yaml").read_text(), "yaml")))
    _holds(d, "systems", "validate", str(f))


@FUZZ
@given(data=st.data())
def test_official_system_json(work, data):
    d = _fresh(work, "json")
    f = d / "sys.json"
    f.write_bytes(data.draw(mutated((work / "dgx-h100x8.json").read_text(), "json")))
    _holds(d, "plan", "gpt3", "--system-json", str(f))


@FUZZ
@given(data=st.data())
def test_mllog_line(work, data):
    d = _fresh(work, "log")
    lines = LOG.read_text().splitlines()
    i = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    if ":::MLLOG " in lines[i] and data.draw(st.booleans()):
        record = lines[i].split(":::MLLOG ", 1)[1]
        lines[i] = ":::MLLOG " + data.draw(mutated(record, "json")).decode("utf-8", "replace")
    else:
        lines = lines[: i + 1] if data.draw(st.booleans()) else lines[:i] + [lines[i][: len(lines[i]) // 2]]
    org = d / "MyOrg"
    shutil.copytree(TREE, org)
    f = org / LOG.relative_to(TREE)
    f.write_text("\n".join(lines) + "\n")
    _holds(d, "check", str(f))
    _holds(d, "diagnose", str(f))
    _holds(d, "results", "score", str(org), "--no-check")


@FUZZ
@given(data=st.data(), which=st.sampled_from(["plan.json", "timings.jsonl", "manifest"]))
def test_run_folder(work, data, which):
    d = _fresh(work, "run")
    run = _run_folder(d)
    target = {
        "plan.json": run / "plan.json",
        "timings.jsonl": run / "timings.jsonl",
        "manifest": step_dir(checkpoint_root(run), 24) / MANIFEST,
    }[which]
    if which == "timings.jsonl":
        rows = target.read_text().splitlines()
        i = data.draw(st.integers(min_value=0, max_value=len(rows) - 1))
        rows[i] = data.draw(mutated(rows[i], "json")).decode("utf-8", "replace")
        target.write_text("\n".join(rows) + "\n")
    else:
        target.write_bytes(data.draw(mutated(target.read_text(), "json")))
    _holds(d, "diagnose", str(run))
    _holds(d, "run", "gpt3", "--resume", str(run), "--dry-run")


def test_the_findings_stay_fixed(tmp_path):
    from harness.core.mllog_reader import parse_record

    y = tmp_path / "sys.yaml"
    y.write_text((REPO / "systems" / "dgx-h100x8.yaml").read_text() + "\ndescription: '9'\n")
    code, err = _main("systems", "validate", str(y))
    assert code == 2 and "field 'description': Input should be a valid dictionary" in err
    code, err = _main("run", "gpt3", "--system", "9" * 400, "--dry-run")
    assert code == 2 and err.startswith("error: unknown system '99999")
    assert parse_record('{"time_ms": 1, "key": "k", "value": 1, "metadata": null}') == (
        None,
        "metadata is a NoneType, not an object",
    )
    code, err = _main("run", "gp\x85t3\u2028x")
    assert code == 2 and err.count("\n") == 1 and "'gp\\x85t3\\u2028x'" in err, err


GPT3_KEYS = ["opt_base_learning_rate", "global_batch_size", "max_steps", "seed", "num_layers", "precision"]


@FUZZ
@given(key=st.sampled_from(GPT3_KEYS), value=st.one_of(VALUES.map(str), st.text(max_size=20)))
def test_set_value(work, key, value):
    d = _fresh(work, "set")
    _holds(d, "run", "gpt3", "--set", f"{key}={value}", "--dry-run", "--results-dir", str(d / "r"))


# numeric options: validated at parse (exit 2, one line), never an exit 0 on 0, -5 or 10^12
NUMERIC = [
    ("plan", "gpt3", "--system", "cpu-local", "--global-batch-size"),
    ("run", "gpt3", "--dry-run", "--runs"),
    ("run", "gpt3", "--dry-run", "--nproc-per-node"),
    ("results", "compare", "-b", "gpt3", "--db", "{db}", "--scale"),
]


@FUZZ
@given(
    argv=st.sampled_from(NUMERIC),
    value=st.one_of(st.integers(min_value=-(2**70), max_value=2**70), VALUES.map(str), st.just("9" * 5000)),
)
def test_numeric_option(work, argv, value):
    d = _fresh(work, "numeric")
    argv = tuple(a.format(db=d / "db") for a in argv)
    _holds(d, *argv, str(value), *(("--results-dir", str(d / "r")) if argv[0] == "run" else ()))
    if isinstance(value, int) and value < 1:
        assert _main(*argv, str(value))[0] == 2


class _Hung(BaseException):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):
    """SIGALRM raises in the blocked read (PEP 475): a reader that opens a FIFO fails the example
    instead of hanging the suite."""
    import signal

    def stop(*_):
        # not an OSError (TimeoutError is one: readers catch those and read on), not an Exception
        raise _Hung(f"hung for {seconds} s: a special file was opened")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@settings(FUZZ, phases=[Phase.explicit, Phase.generate])  # a hang is not shrunk: 20 s, then it fails
@given(
    kind=st.sampled_from(["fifo", "socket", "device"]),
    place=st.sampled_from(
        ["results/cpu-local/gpt3/result_1.txt", "results/cpu-local/gpt3/power/result_0/node_0.txt",
         "results/cpu-local/gpt3/scaling.json", "results/cpu-local/package_checker_params",
         "systems/cpu-local.json", "results/cpu-local/gpt3/extra.txt"]
    ),
)  # fmt: skip
def test_a_special_file_in_a_tree(work, kind, place):
    from test_special_files import _special

    d = _fresh(work, "special")
    org = d / "MyOrg"
    shutil.copytree(TREE, org)
    target = org / place
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    _special(kind, target)
    with _deadline(20):
        _holds(d, "check", str(org))
        _holds(d, "results", "score", str(org))
        _holds(d, "diagnose", str(org / "results" / "cpu-local" / "gpt3"))
