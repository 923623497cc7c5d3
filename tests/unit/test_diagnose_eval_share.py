"""`mlperf diagnose` names evaluation overhead above a stated share (issue 47: a run spending 24 %
of its time in evaluation passed as "no symptom"), with the seconds and the share as evidence."""

from __future__ import annotations

import json

from harness.review.diagnose import diagnose
from harness.review.diagnose.published import EVAL_SHARE


def _log(path, eval_s: float, size: str = "full", run_s: float = 1000.0, evals: int = 4):
    """A loose MLPerf log: run_start .. run_stop of `run_s` seconds, `evals` evaluations of
    `eval_s` seconds in all, spread over the run."""
    recs = [("submission_benchmark", "llama2_70b_lora", 0), ("harness_size", size, 0), ("run_start", None, 0)]
    gap = run_s / evals
    for i in range(evals):
        t = (i + 1) * gap - eval_s / evals - 1
        recs += [("eval_start", None, t), ("eval_accuracy", 1.0 - i * 0.01, t + eval_s / evals)]
        recs += [("eval_stop", None, t + eval_s / evals)]
    recs.append(("run_stop", None, run_s))
    lines = [
        ":::MLLOG "
        + json.dumps(
            {
                "key": k,
                "value": v,
                "time_ms": 1_000_000 + t * 1000,
                "metadata": {
                    "samples_count": (i + 1) * 64,
                    **({"status": "success"} if k == "run_stop" else {}),
                },
            }
        )
        for i, (k, v, t) in enumerate(recs)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_quarter_of_the_time_in_evaluation_is_named_with_its_seconds(tmp_path):
    rep = diagnose(_log(tmp_path / "run.log", eval_s=240.0))
    (f,) = rep.findings
    assert f.id == "eval_overhead"
    assert f.evidence["eval_total_s"] == 240.0 and f.evidence["run_s"] == 1000.0
    assert f.evidence["eval_share"] == 0.24 and f.evidence["threshold_share"] == EVAL_SHARE
    assert "240 s of the 1000 s" in f.summary and "24%" in f.summary


def test_a_published_share_stays_quiet_and_a_tiny_run_gets_a_note(tmp_path):
    # 11 %: what the best published llama2_70b_lora results spend (v5.0 Lenovo): no finding
    assert diagnose(_log(tmp_path / "ok.log", eval_s=110.0)).findings == []
    # a tiny run evaluates often by design: said as a note, not a finding
    rep = diagnose(_log(tmp_path / "tiny.log", eval_s=240.0, size="tiny"))
    assert rep.findings == [] and any("240 s of the 1000 s" in n and "tiny" in n for n in rep.notes)
