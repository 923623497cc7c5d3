"""mlperf-harness: run, check and score MLPerf Training v4.0 benchmarks.

Python >= 3.12: megatron-core 0.17 and later require it. Install for CPU work (tests, tiny runs,
reviewing, analysis):
    python3.12 -m venv .venv && . .venv/bin/activate && pip install -e '.[all,test]'
The torch pin keeps CI on the release it was measured with. PyPI's torch 2.13.0 wheel for Python
3.12 is the CUDA build (torch 1.2 GB + nvidia-* 2.7 GB; the whole venv 5.6 GB); it runs on a CPU
as it is. A CPU-only build of 2.13.0 (PyTorch's own index) satisfies the pin too (0.75 GB for
Python 3.11). GPU hosts (an NGC PyTorch container, or any env with a CUDA torch):
    pip install --no-build-isolation -e '.[gpu]'
The `gpu` extra has the same training libraries with NO torch requirement of its own (megatron-core,
accelerate and peft ask for torch>=2.6 / >=2.0 / >=1.13, which a container's torch, pre-release
versions like 2.10.0a0+nv25.11 included, already satisfies: pip keeps it) and Transformer Engine in
a range that keeps the container's build: NGC PyTorch 25.11 ships TE 2.9.0, later releases newer ones.
"""

from setuptools import find_packages, setup

CORE = [
    "click>=8.1",
    "rich>=13",
    "pydantic>=2.6",
    "PyYAML>=6",
    "numpy>=1.26",
    "pandas>=2.2",
    "pyarrow>=15",
    "matplotlib>=3.8",
    "psutil>=5.9",  # stop a run's whole process tree (torch elastic puts ranks in new sessions)
    # The official emitter and checkers; scores are verified against this exact release.
    "mlperf-logging==4.1.68",
]
# The CPU wheel of the release CI runs (never in the `gpu` extra: it would replace a CUDA build).
CPU_TORCH = ["torch==2.13.0"]
# Training libraries, torch left to the environment.
TRAIN = [
    # Tested with 0.19.2 on CPU through reference_impls/megatron_gpt/cpu_compat.py (0.19.0 not run); a
    # later minor release may move the torch.cuda call sites that the compatibility layer patches
    # (tests/unit/test_gpt3_cpu_compat.py fails loudly when one does). 0.17+ need Python >= 3.12.
    "megatron-core>=0.19.2,<0.20",
    "safetensors>=0.4",
]
LLM = ["transformers>=5.0,<6", "peft>=0.21,<0.22", "accelerate>=1.0"]
GNN = ["torch-geometric>=2.8,<2.9"]
SD = ["diffusers>=0.42,<0.43", "transformers>=5.0,<6", "scikit-learn>=1.4"]
# Transformer Engine as NGC containers ship it: from 2.9 (NGC 25.11) with no cap below 3, so a
# newer container's TE is kept rather than replaced by a source build. megatron-core 0.19.2's own
# `te` extra names no version; it gates features by TE version up to 2.14 (is_te_min_version), so
# an older TE runs with those features off. No TE build has run here (no GPU).
TE = ["transformer-engine[pytorch]>=2.9.0a0,<3"]
# MLPerf Power capture (harness/run/power): the Redfish client for `kind: redfish` sources (IPMI
# sources call Debian's ipmitool) and NVML (nvidia-ml-py) for the GPU telemetry beside the node readings.
POWER = ["redfish>=3.2,<4", "nvidia-ml-py>=12"]
EXTRAS = {
    "train": CPU_TORCH + TRAIN,
    "llm": CPU_TORCH + TRAIN + LLM,
    "gnn": CPU_TORCH + TRAIN + GNN,
    "sd": CPU_TORCH + TRAIN + SD,
    "power": POWER,
    # pyghmi: the loopback BMC's IPMI server (.ci/loopback_bmc.py) the power tests read
    "test": [
        "pytest>=8",
        "pytest-xdist>=3.5",
        "ruff>=0.6",
        "filelock>=3.12",
        "hypothesis>=6.100",
        "pyghmi>=1.5",
        # the type checker .ci/run runs (pyproject.toml [tool.pyrefly] says over what, and why it)
        "pyrefly>=1.5,<2",
    ],
    # GPU hosts only (an env with a CUDA torch; --no-build-isolation so TE builds against it);
    # never on a CPU machine: an installed-but-broken transformer_engine makes `import
    # megatron.core` fail.
    "gpu": sorted(set(TRAIN + LLM + GNN + SD + TE + POWER)),
}
EXTRAS["all"] = sorted(set(EXTRAS["llm"] + EXTRAS["gnn"] + EXTRAS["sd"] + POWER))  # CPU: with the torch pin

setup(
    name="mlperf-harness",
    version="0.1.0",
    description="Run, check and score MLPerf Training v4.0 benchmarks (gpt3, llama2_70b_lora, gnn, stable_diffusion)",
    python_requires=">=3.12",
    packages=find_packages(include=["harness*", "benchmarks*", "reference_impls*", "systems*"]),
    package_data={"": ["*.yaml", "*.json", "*.txt"]},
    include_package_data=True,
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["mlperf=harness.cli:main"]},
)
