"""`python tests/prepare_seeded.py SEED MODULE --plan PREPARE.plan.json`: a benchmark's prepare task
as `mlperf prepare` starts it (`python -m MODULE --plan ...`, harness/run/execute.py: prepare), but
with Python's, NumPy's and torch's global generators seeded from SEED first.

A fresh torch process's global generator starts from the same seed every time, so two plain
preparations agree even where prepare draws from it unseeded; started with two different SEEDs,
such a draw gives two different data folders (tests/integration/test_tiny_data_determinism.py).
"""

from __future__ import annotations

import random
import runpy
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[1])


def main() -> None:
    seed, module, rest = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    # `python -m` puts the working directory first on sys.path, a script its own folder (tests/).
    sys.path[0] = REPO
    import numpy
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
