"""The resolve layer: systems, configs and layouts -> RunPlans, plus the benchmark specs (pure)."""
