"""`mlperf diagnose RUN_DIR|LOG`: the troubleshooting table applied to one run (torch-free).

    report = diagnose("results/runs/gpt3/cpu-local/<id>")
    for f in report.findings: print(f.symptom, f.evidence, f.remedy)

Inputs: harness/review/diagnose/inputs.py (log, timings.jsonl, routing.jsonl, process output, plan).
Detectors: harness/review/diagnose/detectors.py (speed, data loading, learning rate, out of memory,
unbalanced MoE experts) and published.py (what any MLPerf log says: block/eval intervals, tracked_stats throughput,
evaluation overhead, throughput per accelerator against the best published result in a database).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.review.diagnose import detectors, energy, host, inputs, published
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
    profile: dict = field(default_factory=dict)
    host: dict | None = None
    """The load average beside the run and the host's cores (host_load.json), where recorded."""

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
            "profile": self.profile,
            "host": self.host,
            "notes": self.notes,
        }


def diagnose(
    target: str | Path, db=None, accelerators: int | None = None, accelerator: str | None = None
) -> Report:
    """`db`: the ingested results table (results.ingest.load) for the comparison with published results."""
    run = inputs.load(target, accelerators, accelerator)
    findings = [f for det in detectors.DETECTORS if (f := det(run)) is not None]
    prof = published.profile(run)
    for det in (published.eval_overhead(run, prof), published.slow_vs_published(run, prof, db)):
        if det is not None:
            findings.append(det)
    if busy := host.busy(run.host):  # evidence about the host, not a finding against the code
        run.notes.append(busy)
    measured = energy.profile(run)  # power mode: energy per sample
    if measured is not None:
        prof.update(measured[0])
        run.notes.append(measured[1])
    if db is not None and prof.get("progress_per_s_per_acc") is None:
        run.notes.append(
            "no comparison with published results: accelerator count or model unknown (--accelerators, --accelerator)"
        )
    return Report(
        source=run.source,
        run_dir=str(run.run_dir) if run.run_dir else None,
        log=str(run.log_path) if run.log_path else None,
        benchmark=run.benchmark,
        status=run.stop_status,
        steps=len(run.timings),
        findings=findings,
        notes=run.notes,
        profile=prof,
        host=run.host,
    )


__all__ = ["Finding", "Report", "diagnose"]
