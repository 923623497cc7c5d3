"""Rack-aware host order for Slurm jobs.

Megatron places tensor-parallel ranks on consecutive ranks, then pipeline stages, then data
parallel replicas. Ranks follow node order, so when node order follows the racks (leaf switches),
TP/PP groups and neighbouring DP replicas stay behind one switch and only the DP all-reduce
crosses the spine. Slurm numbers nodes in its own (name) order, so the job computes the order
itself once it knows its allocation:

    scontrol show hostnames "$SLURM_JOB_NODELIST" | awk (this table) > hostfile

`order_hosts` is the same rule in Python (for tests and `--dry-run` explanations): allocated
hosts listed in the descriptor's racks come first, rack by rack, in the listed order; hosts the
descriptor doesn't list follow in Slurm's order.
"""

from __future__ import annotations


def order_hosts(allocated: list[str], racks: list[list[str]]) -> list[str]:
    pos = {h: (r, i) for r, rack in enumerate(racks) for i, h in enumerate(rack)}
    unknown = len(racks)
    keyed = [(pos.get(h, (unknown, j)), h) for j, h in enumerate(allocated)]
    return [h for _, h in sorted(keyed)]


def awk_program(racks: list[list[str]]) -> str:
    """An awk program (stdin: one allocated host per line) printing the hosts in rack order.

    The table of hosts is embedded as a `case`-free lookup built from a here-string in BEGIN;
    host names are validated ids (see script_values.check_value), so they need no escaping in awk.
    """
    table = " ".join(f"{h}:{r}:{i}" for r, rack in enumerate(racks) for i, h in enumerate(rack))
    unknown = len(racks)
    return (
        'BEGIN { n = split("' + table + '", t, " "); '
        'for (k = 1; k <= n; k++) { split(t[k], f, ":"); rack[f[1]] = f[2]; pos[f[1]] = f[3] } } '
        '{ if ($1 in rack) printf "%09d %09d %s\\n", rack[$1], pos[$1], $1; '
        f'else printf "%09d %09d %s\\n", {unknown}, NR, $1 }}'
    )
