"""Where `--system NAME` looks: the search path of system descriptors.

A name (not a path) is looked up, first hit wins, in
  1. ./systems/NAME.yaml            (the current directory: a submitter's own checkout)
  2. each folder of $MLPERF_SYSTEMS_PATH (colon-separated, in order)
  3. the package's own systems/      (the shipped descriptors)
A folder met twice (the package's systems/ when the harness runs from its checkout) counts once.
Kept apart from systems.py (the model) so the lookup has one definition and no model code.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MLPERF_SYSTEMS_PATH"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "systems"


def search_dirs(package: Path = PACKAGE_DIR) -> list[Path]:
    """The folders, in lookup order, each once (by resolved path); missing ones are kept, so the
    'looked in' line of an unknown name shows what the user configured."""
    env = [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p.strip()]
    out: list[Path] = []
    seen: set[Path] = set()
    pkg = _key(package)
    for d in [Path("systems"), *env, package]:
        key = _key(d)
        if key not in seen:
            seen.add(key)
            out.append(package if key == pkg else d)  # the checkout's own systems/: say 'shipped'
    return out


def _key(d: Path) -> Path:
    try:
        return d.resolve()
    except (OSError, RuntimeError):  # a looping symlink: kept, it simply holds nothing
        return d.absolute()


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
        return False


def candidates(name: str, package: Path = PACKAGE_DIR) -> list[Path]:
    """Every file the name could mean, in lookup order: the first is the one used, the rest are
    shadowed by it."""
    if not name or any(c in name for c in "/\\\0"):
        return []
    return [d / f"{name}.yaml" for d in search_dirs(package) if _is_file(d / f"{name}.yaml")]


def all_found(package: Path = PACKAGE_DIR) -> dict[str, list[Path]]:
    """name -> its files in lookup order (the first wins), over the whole search path."""
    out: dict[str, list[Path]] = {}
    for d in search_dirs(package):
        try:
            files = sorted(d.glob("*.yaml"))
        except OSError:
            continue
        for f in files:
            out.setdefault(f.stem, []).append(f)
    return dict(sorted(out.items()))


def looked_in(package: Path = PACKAGE_DIR) -> str:
    """The search path in one line, for an unknown name."""
    env = os.environ.get(ENV, "")
    parts = []
    for d in search_dirs(package):
        if d == package:
            parts.append(f"{d} (shipped)")
        elif d == Path("systems"):
            parts.append(f"{Path.cwd() / d}")
        else:
            parts.append(f"{d} (${ENV})")
    unset = "" if env else f" (${ENV} is unset)"
    return ", ".join(parts) + unset


def shown(p: Path) -> str:
    """A descriptor's path as the user sees it: relative to the current directory when under it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return str(p)


def is_path(name_or_path: str) -> bool:
    """A descriptor file rather than a name: ends in .yaml/.yml or holds a path separator."""
    return Path(name_or_path).suffix in (".yaml", ".yml") or os.sep in name_or_path


def source_note(name_or_path: str, package: Path = PACKAGE_DIR) -> str | None:
    """Which file a name meant, when that is not simply the shipped one: a user's own descriptor,
    or one that shadows another of the same name further down the search path."""
    if is_path(name_or_path):
        return None
    hits = candidates(name_or_path, package)
    if not hits or hits == [package / f"{name_or_path}.yaml"]:
        return None
    others = ", ".join(shown(h) for h in hits[1:])
    return f"system '{name_or_path}': {shown(hits[0])}" + (
        f" (first on the search path; also {others}, not used)" if others else ""
    )


def tuned_config_names() -> list[str]:
    """What a descriptor's `tuned_config` may name: every per-system config a benchmark ships."""
    import benchmarks

    stems = {p.stem for b in benchmarks.registered() for p in b.configs_dir.glob("*.yaml")}
    return sorted(stems - {"tiny"})
