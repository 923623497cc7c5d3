"""`mlperf diagnose RUN_DIR|LOG`: the troubleshooting table applied to one run (torch-free).

    report = diagnose("results/runs/gpt3/cpu-local/<id>")
    for f in report.findings: print(f.symptom, f.evidence, f.remedy)

Inputs: harness/review/diagnose/inputs.py (log, timings.jsonl, process output, plan).
Detectors: harness/review/diagnose/detectors.py (speed, data loading, learning rate, out of memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.review.diagnose import detectors, inputs
from harness.review.diagnose.detectors import Finding

SCHEMA_VERSION = 1


@dataclass
class Report:
    source: str
    run_dir: str | None
    log: str | None
    benchmark: str | None
    status: str | None
    steps: int
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "run_dir": self.run_dir,
            "log": self.log,
            "benchmark": self.benchmark,
            "run_stop_status": self.status,
            "steps_timed": self.steps,
            "healthy": not self.findings,
            "findings": [f.to_dict() for f in self.findings],
            "notes": self.notes,
        }


def diagnose(target: str | Path) -> Report:
    run = inputs.load(target)
    findings = [f for det in detectors.DETECTORS if (f := det(run)) is not None]
    return Report(
        source=run.source,
        run_dir=str(run.run_dir) if run.run_dir else None,
        log=str(run.log_path) if run.log_path else None,
        benchmark=run.benchmark,
        status=run.stop_status,
        steps=len(run.timings),
        findings=findings,
        notes=run.notes,
    )


__all__ = ["Finding", "Report", "diagnose"]
