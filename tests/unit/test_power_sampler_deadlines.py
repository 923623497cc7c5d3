"""The power sampler reads on absolute deadlines (harness/run/power/sampler.py `sample`), proven on
a simulated clock: the reading latency and the machine's load decide nothing here. The integration
test (tests/integration/test_power_capture.py) reads a real ipmitool against the loopback BMC and
asserts only what holds on a busy machine too."""

from __future__ import annotations

import io
import json

import pytest

from harness.run.power import sampler


class Clock:
    """time.monotonic / time.sleep / time.time of a machine whose only delays are the reads'."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += max(0.0, s)


class Reader:
    """Each read takes `latency` seconds (e.g. an ipmitool process) and records when it started."""

    def __init__(self, clock: Clock, latency: float):
        self.clock, self.latency, self.starts = clock, latency, []

    def read(self) -> float:
        self.starts.append(self.clock.now)
        self.clock.now += self.latency
        return 1000.0


def _sample(monkeypatch, latency: float, reads: int, interval: float = 0.1) -> list[float]:
    clock = Clock()
    monkeypatch.setattr(sampler, "time", clock)
    reader = Reader(clock, latency)
    out = io.StringIO()
    sampler.sample(reader, interval, out, stopping=lambda: len(reader.starts) >= reads)
    assert all("w" in json.loads(line) for line in out.getvalue().splitlines())
    t0 = reader.starts[0]
    return [round((t - t0) / interval, 6) for t in reader.starts]  # in intervals since the first


@pytest.mark.parametrize("latency", [0.0, 0.02, 0.08])
def test_reads_start_on_the_deadlines_whatever_a_read_costs(monkeypatch, latency):
    """A sleep-after-read loop would start read k at k x (interval + latency): drift."""
    slots = _sample(monkeypatch, latency, reads=30)
    assert slots[:30] == [float(k) for k in range(30)]


def test_a_read_longer_than_a_slot_skips_the_missed_slots_and_never_bursts(monkeypatch):
    """0.25 s reads at 10 Hz: every read starts on a deadline, the next one still ahead (3 slots
    apart), not in a burst of make-up reads."""
    slots = _sample(monkeypatch, 0.25, reads=10)
    assert slots[:10] == [float(3 * k) for k in range(10)]
