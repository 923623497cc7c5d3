"""harness/run/lr_find.py analysis: smoothing, the suggestion, the plot (no training)."""

from __future__ import annotations

import math
import random

from harness.run import lr_find as lf


def _curve(seed=0, n=250):
    rng = random.Random(seed)
    lrs = [1e-5 * (1e5) ** (i / (n - 1)) for i in range(n)]
    # falls from 1e-4 to a minimum at 3e-3, explodes after 2e-2; noisy
    loss = [
        1.3
        - 0.12 / (1 + math.exp(-3 * (math.log10(lr) + 3.5)))
        + 0.6 * max(0.0, math.log10(lr / 3e-3)) ** 2
        + rng.gauss(0, 0.03)
        for lr in lrs
    ]
    return lrs, loss


def test_suggestion_is_half_the_smoothed_minimum():
    for seed in range(3):
        lrs, loss = _curve(seed)
        lr_min, steep, sug = lf.analyse(lrs, loss)
        assert 1e-3 < lr_min < 8e-3, lr_min
        assert sug == lr_min / 2
        assert steep is not None and 3e-5 < steep < lr_min


def test_smoothing_is_bias_corrected_and_stops_at_nan():
    sm = lf.smooth([2.0, 2.0, None, 2.0])
    assert sm[0] == 2.0 and sm[1] == 2.0 and sm[2] is None and abs(sm[3] - 2.0) < 1e-12
    assert lf.analyse([1e-4, 1e-3], [1.0, 1.0]) == (None, None, None)


def test_plot_writes_a_png(tmp_path):
    lrs, loss = _curve()
    lr_min, steep, sug = lf.analyse(lrs, loss)
    res = lf.LrFindResult(
        "gpt3", "cpu-local", str(tmp_path), len(lrs), lrs, loss, lf.smooth(loss), lr_min, steep, sug, 3e-3
    )
    p = lf.plot(res, tmp_path / "x.png")
    assert p.read_bytes()[:4] == b"\x89PNG"
