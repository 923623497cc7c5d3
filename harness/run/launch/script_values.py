"""What a system descriptor may put into a job script: every value is checked here before
rendering (ConfigError naming the field) and quoted with `shlex.quote` when rendered, so a
system file can never smuggle code into a job."""

from __future__ import annotations

import re
import shlex

from harness.core.errors import ConfigError

# A value may not contain these: they start commands, substitutions or redirections in bash.
META = set("`$;&|<>()\\'\"\n\r\t\0")
# Slurm names (partition, account, host): a stricter id alphabet.
_SLURM_ID = re.compile(r"[A-Za-z0-9_.@+-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def q(value) -> str:
    return shlex.quote(str(value))


def check_value(field: str, value: str, system_name: str, *, slurm_id: bool = False) -> str:
    """Refuse a descriptor value that would inject shell code (or is not a Slurm name)."""
    bad = sorted({c for c in value if c in META or ord(c) < 32})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise ConfigError(
            f"system '{system_name}': {field} {value!r} contains shell metacharacter(s) {shown}; refused"
        )
    if slurm_id and value and not _SLURM_ID.fullmatch(value):
        raise ConfigError(
            f"system '{system_name}': {field} {value!r} is not a valid Slurm name (letters, digits, '_.@+-')"
        )
    return value


def check_launcher(system) -> None:
    """Every launcher field that reaches the script but the container (harness/run/launch/pyxis.py)."""
    lc, name = system.launcher, system.name
    check_value("launcher.partition", lc.partition, name, slurm_id=True)
    check_value("launcher.account", lc.account, name, slurm_id=True)
    for k, v in lc.env.items():
        if not _ENV_NAME.fullmatch(k):
            raise ConfigError(f"system '{name}': launcher.env key {k!r} is not an environment variable name")
        check_value(f"launcher.env.{k}", str(v), name)
    for i, cmd in enumerate(lc.node_tuning):
        check_value(f"launcher.node_tuning[{i}]", cmd, name)
    for r, rack in enumerate(lc.racks):
        for h in rack:
            check_value(f"launcher.racks[{r}]", h, name, slurm_id=True)
