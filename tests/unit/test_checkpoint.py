"""harness/train/checkpoint.py: atomic, checksummed, rotated checkpoints loaded without unpickling."""

from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest
import torch

from harness.train import checkpoint as ck


def _model_opt_sched(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + 0.1 * s))
    return model, opt, sched


def _step(model, opt, sched, step):
    g = torch.Generator().manual_seed(1000 + step)  # data position = step: deterministic batches
    x = torch.randn(32, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    noise = torch.randn(32, 1) * 0.01  # consumes the global RNG: the RNG state must round-trip
    loss = torch.nn.functional.mse_loss(model(x) + noise, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


def _state(model, opt, sched):
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "rng": ck.capture_rng(),
    }


def test_resume_continues_bit_identically(tmp_path):
    model, opt, sched = _model_opt_sched()
    c = ck.Checkpointer(tmp_path / "ckpt")
    for s in range(5):
        _step(model, opt, sched, s)
    c.save(5, _state(model, opt, sched), meta={"step": 5, "samples": 5 * 32})
    uninterrupted = [_step(model, opt, sched, s) for s in range(5, 10)]

    model2, opt2, sched2 = _model_opt_sched(seed=123)  # different init: everything must come from disk
    torch.manual_seed(999)
    found = c.latest()
    assert found.step == 5 and found.manifest["meta"] == {"step": 5, "samples": 160}
    state, manifest = c.load(found.path)
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["optimizer"])
    sched2.load_state_dict(state["scheduler"])
    ck.restore_rng(state["rng"])
    resumed = [_step(model2, opt2, sched2, s) for s in range(manifest["meta"]["step"], 10)]
    assert resumed == uninterrupted


def test_rng_round_trip_all_generators():
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gaussian in Python's state
    saved = ck.capture_rng()
    expect = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    ck.restore_rng(saved)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expect


def test_rotation_keeps_newest_and_sweeps_partials(tmp_path):
    c = ck.Checkpointer(tmp_path, keep=2)
    (tmp_path / ".step_00000001.partial").mkdir(parents=True)  # a save killed mid-way
    for s in (2, 4, 6):
        c.save(s, {"w": torch.full((3,), float(s))})
    assert [s for s, _ in ck.list_steps(tmp_path)] == [4, 6]
    assert not (tmp_path / ".step_00000001.partial").exists()
    assert not list(tmp_path.glob("step_*/.*tmp*"))


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_manifest", "bad_manifest", "missing_file"])
def test_torn_or_corrupt_newest_falls_back_to_previous(tmp_path, damage):
    c = ck.Checkpointer(tmp_path, keep=3)
    for s in (10, 20):
        c.save(s, {"w": torch.arange(1000, dtype=torch.float32) + s})
    newest = ck.step_dir(tmp_path, 20)
    f = newest / ck.rank_file(0)
    if damage == "flip":
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
    elif damage == "truncate":
        f.write_bytes(f.read_bytes()[:100])
    elif damage == "no_manifest":
        (newest / ck.MANIFEST).unlink()
    elif damage == "bad_manifest":
        (newest / ck.MANIFEST).write_text('{"format": "mlperf-harness-chec')
    else:
        f.unlink()
    problems: list[str] = []
    found = ck.latest_good(tmp_path, problems=problems)
    assert found.step == 10 and len(problems) == 1 and "step_00000020" in problems[0]
    state, _ = c.load(found.path)
    assert torch.equal(state["w"], torch.arange(1000, dtype=torch.float32) + 10)
    with pytest.raises(ck.CheckpointError):
        c.load(newest)


def test_refuses_objects_that_would_need_unpickling(tmp_path):
    c = ck.Checkpointer(tmp_path)
    with pytest.raises(ck.CheckpointError, match="cannot be stored"):
        c.save(1, {"obj": object()})
    with pytest.raises(TypeError):
        c.save(1, {"w": torch.zeros(1)}, meta={"bad": object()})
    assert ck.list_steps(tmp_path) == []


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_load_never_unpickles_arbitrary_objects(tmp_path):
    """A rank file crafted with a pickled callable, even with a matching checksum, is refused."""
    c = ck.Checkpointer(tmp_path)
    path = c.save(1, {"w": torch.zeros(2)})
    f = path / ck.rank_file(0)
    torch.save({"w": Evil()}, f)
    manifest = json.loads((path / ck.MANIFEST).read_text())
    manifest["files"][ck.rank_file(0)] = {"bytes": f.stat().st_size, "sha256": ck.sha256_file(f)}
    (path / ck.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ck.CheckpointError, match="cannot be loaded safely"):
        c.load(path)


def _two_ranks(body) -> None:
    """`body(rank, barrier)` in two threads, as two ranks meeting at a real barrier."""
    bar = threading.Barrier(2)
    errors = []

    def rank(r):
        try:
            body(r, bar.wait)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            bar.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_two_ranks_one_manifest(tmp_path):
    """Ranks as threads with a real barrier: one manifest with both files' checksums."""

    def rank(r, barrier):
        c = ck.Checkpointer(tmp_path, rank=r, world_size=2, barrier=barrier)
        for s in (3, 6, 9):
            c.save(s, {"w": torch.full((4,), float(r * 100 + s))}, meta={"step": s}, rank_meta={"r": r})
        state, man = c.load(c.latest().path)
        assert state["w"][0].item() == r * 100 + 9
        assert man["ranks"][str(r)] == {"r": r}

    _two_ranks(rank)
    man = ck.verify(ck.step_dir(tmp_path, 9), world_size=2)
    assert sorted(man["files"]) == [ck.rank_file(0), ck.rank_file(1)]
    assert [s for s, _ in ck.list_steps(tmp_path)] == [6, 9]
    with pytest.raises(ck.CheckpointError, match="2 ranks"):
        ck.verify(ck.step_dir(tmp_path, 9), world_size=4)


def test_hash_share_splits_every_file_once_balanced_by_size():
    files = {"rank_00000.pt": 10, "rank_00001.pt": 10, "sharded/a": 100, "sharded/b": 60, "sharded/c": 50}
    shares = [ck.hash_share(files, r, 2) for r in (0, 1)]
    assert shares == [["rank_00000.pt", "sharded/a"], ["rank_00001.pt", "sharded/b", "sharded/c"]]


def test_sharded_writer_two_ranks_one_manifest_hashed_by_both(tmp_path):
    """Each rank writes its rank file and its part of a sharded checkpoint; the manifest lists and
    hashes all of them (each rank its share), and a corrupt shard is caught."""

    def rank(r, barrier):
        c = ck.Checkpointer(tmp_path, rank=r, world_size=2, barrier=barrier)
        for s in (1, 2):
            data = bytes([r, s]) * 1000
            c.save(
                s,
                {"rng": torch.tensor([r])},
                {"step": s},
                write=lambda f, d=data: (f / f"shard_{r}.bin").write_bytes(d),
            )

    _two_ranks(rank)
    newest = ck.step_dir(tmp_path, 2)
    man = ck.verify(newest, world_size=2)
    assert sorted(man["files"]) == [
        "rank_00000.pt",
        "rank_00001.pt",
        "sharded/shard_0.bin",
        "sharded/shard_1.bin",
    ]
    assert sorted(p.name for p in newest.iterdir()) == [
        "manifest.json",
        "rank_00000.pt",
        "rank_00001.pt",
        "sharded",
    ]
    shard = newest / "sharded" / "shard_1.bin"
    shard.write_bytes(b"\xff" + shard.read_bytes()[1:])
    sizes = {n: i["bytes"] for n, i in man["files"].items()}
    owner = next(r for r in (0, 1) if "sharded/shard_1.bin" in ck.hash_share(sizes, r, 2))
    with pytest.raises(ck.CheckpointError, match="shard_1.bin: sha256 mismatch"):
        ck.verify(newest, 2, share=(owner, 2))
    ck.verify(newest, 2, share=(1 - owner, 2))  # the other rank's share does not include it
    assert ck.latest_good(tmp_path, 2).step == 1


def test_every_sharded_file_and_folder_is_fsynced_before_the_manifest(tmp_path, monkeypatch):
    """The frameworks' savers do not fsync all they write (megatron's common.pt, metadata.json, no
    folder): the checkpointer does, each rank its share, before rank 0 writes the manifest. A power
    loss after the commit must not leave a manifest naming files the disk never got."""
    import os

    synced = []  # (path, is the manifest's temp file) in fsync order, over both ranks
    real = os.fsync

    def record(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(path)
        return real(fd)

    monkeypatch.setattr(os, "fsync", record)

    def writer(r):  # like a framework saver: plain writes, a subfolder, no fsync
        def write(folder):
            (folder / f"__{r}_0.distcp").write_bytes(bytes([r]) * 5000)
            if r == 0:
                (folder / "common.pt").write_bytes(b"c" * 100)
                (folder / "meta").mkdir()
                (folder / "meta" / "metadata.json").write_text("{}")

        return write

    def rank(r, barrier):
        ck.Checkpointer(tmp_path, rank=r, world_size=2, barrier=barrier).save(
            5, {"rng": torch.tensor([r])}, {"step": 5}, write=writer(r)
        )

    _two_ranks(rank)
    final = ck.step_dir(tmp_path, 5)
    partial = tmp_path / ".step_00000005.partial"
    manifest_at = next(i for i, p in enumerate(synced) if os.path.basename(p).startswith(".manifest.json."))
    before = {os.path.relpath(p, partial) for p in synced[:manifest_at]}
    files = set(ck.verify(final, world_size=2)["files"])
    assert {n for n in files if n.startswith("sharded/")} == {
        "sharded/__0_0.distcp", "sharded/__1_0.distcp", "sharded/common.pt", "sharded/meta/metadata.json"
    }  # fmt: skip
    assert files <= before, sorted(files - before)
    assert {"sharded", "sharded/meta", "."} <= before, sorted(before)
