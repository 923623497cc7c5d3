"""The benchmark a plan names, for the family code that serves several (its data manifest, its
config class): the registry's one `get`, as the rank's entry resolves it."""

from __future__ import annotations

from harness.core.data_manifest import DataManifest
from harness.core.runplan import RunPlan


def of(plan: RunPlan):
    import benchmarks

    return benchmarks.get(plan.benchmark)


def manifest(plan: RunPlan) -> DataManifest:
    """Its data manifest (PREPARED.json's fields)."""
    impl = of(plan).impl
    assert impl is not None  # the rank's entry refuses a benchmark without an implementation
    return impl.data
