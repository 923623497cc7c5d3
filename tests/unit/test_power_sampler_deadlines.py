"""The power sampler reads on absolute deadlines (harness/run/power/sampler.py `sample`), proven on
a simulated clock: the reading latency and the machine's load decide nothing here; and its first
reading (`probe`) is tried again while it times out, never when it is refused. The integration
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


class Flaky:
    """A source whose first `timeouts` reads time out, then answers; or refuses every read."""

    def __init__(self, timeouts: int = 0, refuse: bool = False):
        self.timeouts, self.refuse, self.reads = timeouts, refuse, 0

    def read(self) -> float:
        self.reads += 1
        if self.refuse:
            raise sampler.ReadError("Unable to establish IPMI v2 / RMCP+ session")
        if self.reads <= self.timeouts:
            raise sampler.ReadTimeout("no answer within 0.15 s")
        return 1000.0


def test_the_first_reading_is_tried_again_only_while_it_times_out():
    """A loaded host missed the 0.15 s bound on the first reading once, and the run was refused
    (fails if probe reads once); a refusal is final at once (fails if every error is retried)."""
    late = Flaky(timeouts=sampler.PROBE_TRIES - 1)
    sampler.probe(late)
    assert late.reads == sampler.PROBE_TRIES
    with pytest.raises(sampler.ReadTimeout):
        sampler.probe(Flaky(timeouts=sampler.PROBE_TRIES))
    refused = Flaky(refuse=True)
    with pytest.raises(sampler.ReadError, match="RMCP"):
        sampler.probe(refused)
    assert refused.reads == 1
