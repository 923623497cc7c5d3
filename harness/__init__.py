"""mlperf-harness: one path from `mlperf run` to an official MLPerf Training submission tree.

Nothing here imports torch: the CLI, systems, registry, checking and scoring stay fast and
installable without the training stack. Training code lives in `reference_impls/`.
"""

__version__ = "0.1.0"
