"""`mlperf plan --explain`: every term of the best layout's step time, with its formula, the
constants it used (and where they come from) and its value. The values are the model's own
(harness.planner.timing); the lines here only name and show them."""

from __future__ import annotations

import math

from harness.planner import timing as T
from harness.planner.search import Plan


def _g(x: float) -> str:
    return f"{x:.4g}"


def terms(plan: Plan) -> list[dict]:
    """[{term, formula, value}] for the best option (value: seconds per step unless named)."""
    o = plan.options[0]
    c, t, hw, k, w = o.candidate, o.time, plan.hardware, plan.constants, plan.workload
    b = t["breakdown_s"]
    world, ga = hw.world, c.ga(hw.world)
    prec = "bf16" if w.precision == "fp8" else w.precision
    rate = T.compute_rate(w, c, hw, k)
    fam = float(k.get("family", {}).get(hw.family, 1.0))
    out = [
        {
            "term": "samples to converge",
            "formula": f"{'RCP mean at GBS ' + str(c.gbs) + ' (ruleset ' + plan.ruleset + ')' if w.size == 'full' else 'tiny: data/tiny.yaml or your calibration'}"
            f"; steps = ceil(samples / GBS) = {t['steps']}",
            "value": t["samples_to_converge"],
        },
        {
            "term": "rate",
            "formula": f"{prec} peak {_g(hw.peak(prec) / 1e12)} TFLOP/s x mfu[{w.name}] {_g(T.bench_value(k, 'mfu', w.name))}"
            f" x family[{hw.family}] {_g(fam)} x stack[{k.get('stack_used')}] {_g(k.get('stack_factor', 1.0))}"
            + (f" x fp8_speedup {_g(k['fp8_speedup'])}" if w.precision == "fp8" and c.fp8 else "")
            + " (TFLOP/s per accelerator)",
            "value": rate / 1e12,
        },
    ]
    if w.kind == "model_parallel":
        tokens = c.mbs * w.seq / c.cp
        eff = tokens / (tokens + k["tokens_half"])
        extra = w.recompute[c.recompute].extra_compute
        out.append(
            {
                "term": "compute",
                "formula": f"GBS {c.gbs} x {_g(w.flops_per_sample)} FLOP x (1 + {_g(extra)} recompute '{c.recompute}') / "
                f"world {world} / (rate x eff_mb {_g(eff)} = {_g(tokens)} / ({_g(tokens)} + tokens_half {k['tokens_half']}))",
                "value": b["compute"],
            }
        )
        exp = k["tp_exposed"] if c.tp_comm_overlap else k["tp_exposed_no_overlap"]
        out.append(
            {
                "term": "tp",
                "formula": f"GA {ga} x TP {c.tp} / CP {c.cp} collectives per microbatch over {hw.intra_gbs} GB/s x coll_eff "
                f"{k['coll_eff']} (+ coll_latency_s {_g(k.get('coll_latency_s', 0))} each) x exposed {_g(exp)}",
                "value": b["tp"],
            }
        )
        if "ep_a2a" in b and w.moe is not None:
            link = "NVLink" if c.ep <= hw.domain else "the NIC"
            out.append(
                {
                    "term": "ep_a2a",
                    "formula": f"GA {ga} x 4 all-to-alls x {w.moe.moe_layers} MoE layers / PP {c.pp} of tokens x "
                    f"top-{w.moe.topk} x hidden {w.hidden} x 2 B x (EP {c.ep} - 1) / EP over {link} "
                    f"(EP {c.ep} vs domain {hw.domain}) x coll_eff {k['coll_eff']}, not overlapped",
                    "value": b["ep_a2a"],
                }
            )
        out.append(
            {
                "term": "pp_bubble",
                "formula": f"compute x (PP {c.pp} - 1) / (GA {ga} x VP {c.vp}) + exposed stage-to-stage sends",
                "value": b["pp_bubble"],
            }
        )
        if "fsdp" in b:
            out.append(
                {
                    "term": "fsdp",
                    "formula": f"max(0, GA x 2 all-gathers of the stage's weights over DPxCP {c.dp(world) * c.cp} "
                    f"- fsdp_overlap {k['fsdp_overlap']} x compute)",
                    "value": b["fsdp"],
                }
            )
    else:
        out.append(
            {
                "term": "compute",
                "formula": f"GBS {c.gbs} / world {world} x {_g(w.flops_per_sample)} FLOP / rate",
                "value": b["compute"],
            }
        )
    out += w.cost.explain(w, c, hw, k, b)  # the benchmark's own terms (its cost model)
    out.append(
        {
            "term": "dp_exposed",
            "formula": f"max(0, gradient reduce over DP {c.dp(world)} - dp_overlap {_g(T.bench_value(k, 'dp_overlap', w.name))} x compute)",
            "value": b["dp_exposed"],
        }
    )
    out.append(
        {
            "term": "overhead",
            "formula": f"step_overhead_s {_g(T.bench_value(k, 'step_overhead_s', w.name))} x stack "
            f"{_g(k.get('stack_overhead_factor', 1.0))} + GA {ga} x "
            f"microbatch_overhead_s {_g(T.bench_value(k, 'microbatch_overhead_s', w.name))} + {c.mbs * ga} samples x "
            f"data_s_per_sample {_g(T.bench_value(k, 'data_s_per_sample', w.name))}",
            "value": b["overhead"],
        }
    )
    out.append(
        {
            "term": "eval (per step)",
            "formula": f"{_g(t.get('evals', 0))} evaluations x (eval_overhead_s "
            f"{_g(T.bench_value(k, 'eval_overhead_s', w.name))} + forward passes) / {t['steps']} steps",
            "value": t["eval_s"] / max(1, t["steps"]),
        }
    )
    total = sum(b.values())
    out.append(
        {
            "term": "predicted minutes",
            "formula": f"(steps {t['steps']} x step {_g(total)} s + evaluations {_g(t['eval_s'])} s) / 60",
            "value": t["predicted_min"],
        }
    )
    assert math.isclose(total, t["step_s"], rel_tol=1e-9)
    from harness.planner import interval as I

    found = I.novelty(plan.bench.name, hw, plan.stack)
    k = I.constants()
    if k:
        s = I.sigma([r for r, _ in found], k)
        out.append(
            {
                "term": "80 % range",
                "formula": f"predicted x exp(-(bias {_g(k['bias'])} +- {I.Z80} x sigma {_g(s)})), sigma^2 = "
                f"seen {_g(k['sigma']['seen'])}^2"
                + "".join(f" + {r} {_g(k['sigma'][r])}^2" for r, _ in found)
                + ("; " + "; ".join(w for _, w in found) if found else "; inside the fitted data"),
                "value": s,
            }
        )
    return out
