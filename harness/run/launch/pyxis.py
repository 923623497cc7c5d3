"""Containers through pyxis (NVIDIA's SPANK plugin for enroot): the `srun --container-*` flags.

pyxis documents (`srun --help`, github.com/NVIDIA/pyxis wiki "Usage"):
    --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH
    --container-mounts=SRC:DST[:FLAGS][,SRC:DST...]   flags joined by '+', e.g. ro+rprivate;
                                                      SRC a path ('/' or '.'), 'tmpfs' or 'umount'
    --container-workdir=PATH
It splits the mount list at ',' and each entry at ':', so no path may contain either; a bad
entry fails the step on every node after the job waited in the queue, hence the checks here,
before anything is submitted.

The checkout, the folder of the run folders and the data folder are mounted at their own
paths, so the absolute paths inside plan.json hold in the container; the image's `python` runs.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import ConfigError
from harness.run.launch.script_values import META, check_value, q


def _mount_error(name: str, i: int, entry: str, why: str) -> ConfigError:
    return ConfigError(
        f"system '{name}': launcher.container.mounts[{i}] {entry!r}: {why} "
        f"(pyxis takes SRC:DST[:FLAGS], SRC and DST paths, flags joined by '+')"
    )


def check(container, name: str) -> None:
    """Refuse what pyxis would refuse (or what the shell would run); None = no container."""
    if container is None:
        return
    check_value("launcher.container.image", container.image, name)
    if not container.image or any(c.isspace() for c in container.image):
        raise ConfigError(
            f"system '{name}': launcher.container.image {container.image!r} is empty or has a space"
        )
    for i, entry in enumerate(container.mounts):
        check_value(f"launcher.container.mounts[{i}]", entry, name)
        if "," in entry or any(c.isspace() for c in entry):
            raise _mount_error(name, i, entry, "one entry per list item, without ',' or spaces")
        src, _, rest = entry.partition(":")
        dst, _, flags = rest.partition(":")
        if not (src.startswith(("/", ".")) or src in ("tmpfs", "umount")):
            raise _mount_error(name, i, entry, "the source must be a path, 'tmpfs' or 'umount'")
        if dst and not dst.startswith(("/", ".")):
            raise _mount_error(name, i, entry, "the target must be a path")
        if ":" in flags or (flags and not all(flags.split("+"))):
            raise _mount_error(name, i, entry, "bad flags")
    wd = container.workdir
    check_value("launcher.container.workdir", wd, name)
    if wd and (not wd.startswith("/") or any(c.isspace() for c in wd)):
        raise ConfigError(f"system '{name}': launcher.container.workdir {wd!r} must be an absolute path")


def _same_path(p: str) -> str:
    if any(c in p for c in ",: ") or any(c in META for c in p):
        raise ConfigError(
            f"path {p!r} cannot be a pyxis container mount (',', ':' or a space in it); "
            f"use --results-dir/--data-dir without them"
        )
    return f"{p}:{p}"


def srun_flags(container, repo: Path, runs_root: Path, data_dir: str) -> list[str]:
    """The srun flags for `container` (checked by `check`); every value quoted."""
    same = list(dict.fromkeys([str(repo), str(runs_root), str(data_dir)]))
    mounts = [_same_path(p) for p in same] + list(container.mounts)
    return [
        f"--container-image={q(container.image)}",
        f"--container-mounts={q(','.join(mounts))}",
        f"--container-workdir={q(container.workdir or repo)}",
    ]
