"""The loop parts every benchmark shares (harness/train/): the timings writer and the run
checkpointer with a sharded writer plugged in (torch.distributed.checkpoint). The checkpoint format
itself, two ranks and sharded files included: test_checkpoint.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from harness.core.errors import HarnessError
from harness.core.runfolder import TIMINGS_COLUMNS, read_timings
from harness.train import checkpoint as ck
from harness.train.run_checkpoint import RunCheckpointer
from harness.train.timings import Timings


def _rt(run_dir, resume_from=None, rank=0):
    log = run_dir / "mlperf.log"
    log.touch()
    plan = SimpleNamespace(run_dir=str(run_dir), log_path=str(log), resume_from=resume_from)
    return SimpleNamespace(plan=plan, rank=rank, world_size=1, is_rank0=rank == 0, any_rank=bool)


def test_timings_one_schema_buffered_appended_on_resume(tmp_path):
    path = tmp_path / "timings.jsonl"
    t = Timings(_rt(tmp_path))
    t.row(1, 0.5, 0.1, samples=8)
    t.row(2, 0.25, 0.0, samples=8)
    assert path.read_bytes() == b""  # buffered: nothing written per step
    t.set_loss(1.5)  # an eval point: the newest row's loss
    t.flush()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [list(r) for r in rows] == [list(TIMINGS_COLUMNS)] * 2
    assert [r["loss"] for r in rows] == [None, 1.5] and rows[1]["samples_per_s"] == 32.0
    assert rows[0]["max_rss_mb"] > 0
    t.row(3, 0.5, 0.0, samples=8)
    with open(path, "a") as f:
        f.write('{"step": 3, "step_ti')  # a kill -9 in the middle of a line ...
    t = Timings(_rt(tmp_path, resume_from="ckpt"))  # ... then the resumed attempt appends
    t.row(3, 0.4, 0.0, samples=8)
    t.close()
    lines = path.read_text().splitlines()
    assert lines[2] == '{"step": 3, "step_ti' and json.loads(lines[3])["step_time_s"] == 0.4
    assert [r["step"] for r in read_timings(path)] == [1, 2, 3]
    other = tmp_path / "rank1"
    other.mkdir()
    with Timings(_rt(other, rank=1)) as t:
        t.row(1, 0.5, 0.0, samples=8)
    assert not (other / "timings.jsonl").exists()  # rank 0 alone writes


class Dcp:
    """A sharded writer/reader as a benchmark plugs it in: torch.distributed.checkpoint."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def write(self, folder):
        import torch.distributed.checkpoint as dcp

        dcp.save({"model": self.model.state_dict(), "opt": self.opt.state_dict()}, checkpoint_id=folder)

    def read(self, folder):
        import torch.distributed.checkpoint as dcp

        sd = {"model": self.model.state_dict(), "opt": self.opt.state_dict()}
        dcp.load(sd, checkpoint_id=folder)
        self.model.load_state_dict(sd["model"])
        self.opt.load_state_dict(sd["opt"])


def _trained(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    return model, opt


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, as meant
def test_run_checkpointer_with_a_sharded_writer_resumes_exactly(tmp_path):
    model, opt = _trained(0)
    c = RunCheckpointer(_rt(tmp_path), every=2, sharded=Dcp(model, opt))
    assert not c.due(1) and c.due(2)
    path = c.save(2, meta={"samples": 16})
    expect = torch.rand(3)  # the RNG continues from the checkpoint after a resume
    assert c.last == 2 and not c.due(3)
    man = ck.verify(path, 1)
    assert man["meta"] == {"samples": 16, "step": 2, "log_offset": 0}
    assert ".metadata" in {p.rsplit("/", 1)[-1] for p in man["files"]}  # DCP's own files are listed

    model2, opt2 = _trained(1)
    applied = []
    r = RunCheckpointer(_rt(tmp_path, resume_from=str(path)), every=2, sharded=Dcp(model2, opt2))
    meta = r.resume(lambda state, meta: applied.append(sorted(state)))
    assert meta["step"] == 2 and r.last == 2 and applied == [["rng"]]
    assert torch.equal(model2.weight, model.weight)
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    assert torch.equal(torch.rand(3), expect)

    shard = next(p for p in (path / "sharded").iterdir() if p.suffix == ".distcp")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(HarnessError, match=r"^cannot resume: .*sha256 mismatch") as e:
        r.resume()
    assert e.value.exit_code == 2
