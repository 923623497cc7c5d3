"""`mlperf run` with the toy entry (tests/toy_train.py) in place of the benchmark's reference code.

    python -m tests.toy_run RESULTS_DIR [--resume RUN_DIR]
    TOY_SYSTEM=path/to/system.yaml TOY_RUNS=3 python -m tests.toy_run RESULTS_DIR   (default cpu-local, 1)

The same path as harness/commands/run.py (execute.resolve / resume.resolve -> execute -> claim),
with the toy benchmark (no data to prepare); exit 0 success, 3 not reached, 130 interrupted, like the CLI. Prints one
JSON line with the run results.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import benchmarks
    from harness.core.errors import HarnessError
    from harness.run import execute, resume
    from tests.toy_train import TOY

    benchmarks.register(TOY)  # the toy benchmark: gpt3's rules, the toy's loop

    results = Path(argv[0])
    try:
        if len(argv) > 2 and argv[1] == "--resume":
            r = resume.resolve(argv[2], TOY)
        else:
            system, runs = os.environ.get("TOY_SYSTEM", "cpu-local"), int(os.environ.get("TOY_RUNS", 1))
            r = execute.resolve(TOY, system, "tiny", runs=runs, seed=7, results_dir=results)
        out = execute.execute(r, results)
    except KeyboardInterrupt:
        print(json.dumps({"interrupted": True}), flush=True)
        return 130
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(json.dumps([execute.as_dict(x) for x in out]), flush=True)
    return 0 if all(x.status == "success" for x in out) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
