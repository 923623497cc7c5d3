"""mlperf-harness: run, check and score MLPerf Training v4.0 benchmarks.

Install for CPU work (tests, tiny runs, reviewing, analysis):
    pip install -e '.[all,test]'
The torch pin matters: an unpinned torch pulls several GB of CUDA wheels on a CPU box.
GPU hosts add the transformer-engine extra inside a CUDA torch environment:
    pip install --no-build-isolation -e '.[all,gpu]'
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
TRAIN = [
    "torch==2.13.0",
    # Tested with 0.16.1 on CPU through reference_impls/gpt3/cpu_compat.py; other releases move
    # the torch.cuda call sites that the compatibility layer patches.
    "megatron-core==0.16.1",
    "safetensors>=0.4",
]
EXTRAS = {
    "train": TRAIN,
    "llm": TRAIN + ["transformers>=5.0,<6", "peft>=0.21,<0.22", "accelerate>=1.0"],
    "gnn": TRAIN + ["torch-geometric>=2.8,<2.9"],
    "sd": TRAIN + ["diffusers>=0.42,<0.43", "transformers>=5.0,<6", "scikit-learn>=1.4"],
    "test": ["pytest>=8", "pytest-xdist>=3.5", "ruff>=0.6"],
    # GPU hosts only (needs a CUDA torch and --no-build-isolation); never in the CPU env:
    # an installed-but-broken transformer_engine makes `import megatron.core` fail.
    "gpu": ["transformer-engine[pytorch]>=2.9.0a0,<2.12.0"],
}
EXTRAS["all"] = sorted(set(EXTRAS["llm"] + EXTRAS["gnn"] + EXTRAS["sd"]))

setup(
    name="mlperf-harness",
    version="0.1.0",
    description="Run, check and score MLPerf Training v4.0 benchmarks (gpt3, llama2_70b_lora, gnn, stable_diffusion)",
    python_requires=">=3.10",
    packages=find_packages(include=["harness*", "benchmarks*", "reference_impls*", "systems*"]),
    package_data={"": ["*.yaml", "*.json", "*.txt"]},
    include_package_data=True,
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["mlperf=harness.cli:main"]},
)
