"""Atomic file writes (a reader sees the old file or the new one, never half of either), the one
test for input paths that are not files at all (FIFOs, sockets, devices), and the one test that an
output path can be written before the work that fills it starts."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import ConfigError


def is_special(path: str | os.PathLike) -> bool:
    """A FIFO, socket or device (opening it could block forever); folders (a result folder's
    power/) and broken/looping links are not special: reading them fails, which is reported."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def refuse_special(path: str | os.PathLike, fix: str = "give the file itself") -> None:
    """Before reading an input file: a FIFO would block the read until some writer came (forever,
    for a user who named the wrong path), a device could be endless. One line (exit 2) instead."""
    if is_special(path):
        raise ConfigError(f"{os.fspath(path)} is not a regular file (a FIFO, socket or device); {fix}")


def open_input(path: str | os.PathLike, mode: str = "r", **kw):
    """open() for reading a file found in a tree: opened non-blocking, so a FIFO never waits for a
    writer, then refused unless it is a regular file (OSError naming what it is: callers already
    turn unreadable files into findings). The one reader for files the user did not name."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fspath(path)} is not a regular file (a FIFO, socket or device)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kw)
    except BaseException:
        os.close(fd)
        raise


def check_output_path(path: str | os.PathLike, *, folder: bool, what: str = "") -> None:
    """Before any work: can `path` (a file, or a folder when `folder`) be written? A path under a
    regular file, a file where a folder is wanted (or the reverse), a dangling link on the way or a
    read-only parent raise one ConfigError line, instead of a crash after the work is done."""
    p = Path(os.path.abspath(path))
    shown = f"{what} {os.fspath(path)}".strip()
    if p.exists():
        if folder and not p.is_dir():
            raise ConfigError(f"{shown}: is a file, not a folder; give a folder (or a new path)")
        if not folder and p.is_dir():
            raise ConfigError(f"{shown}: is a folder; give a file path")
    base = p if folder and p.is_dir() else p.parent
    while not base.exists():
        if base.is_symlink():
            raise ConfigError(f"{shown}: {base} is a dangling link; remove it or choose another path")
        base = base.parent
    if not base.is_dir():
        raise ConfigError(f"{shown}: {base} is a file, so nothing can be made under it; choose another path")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{shown}: {base} is not writable; choose a path you can write to")


def atomic_write_bytes(path: str | Path, write: Callable | bytes) -> None:
    """Write `path` through a temp file beside it (fsync, rename). `write` is the bytes, or a
    function `write(f)` for a binary file object (e.g. `lambda f: torch.save(obj, f)`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(write):
                write(f)
            else:
                f.write(write)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def append_lines(path: str | Path, data: bytes, after_torn: bool = False) -> None:
    """Append whole lines in one open (the side files a run writes on rank 0: timings.jsonl,
    routing.jsonl). `after_torn`: the file may end in a killed attempt's torn line (a resume's
    first write), which then stays on its own line."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if after_torn and size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def fsync_file(path: str | Path) -> None:
    """Flush a file someone else wrote (e.g. a framework's checkpoint writer) to stable storage.
    Not best effort: a file that cannot be made durable must not be committed."""
    fd = os.open(path, os.O_RDONLY)  # Linux flushes the inode's dirty pages whatever the fd mode
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """Make a rename inside `path` durable (best effort: some filesystems refuse)."""
    try:
        fsync_file(path)
    except OSError:
        pass


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
