#!/usr/bin/env bash
# Rehearse the GPU check on CPU, in the package set of the H200 host it first ran on (not part of CI).
#
#   bash bench/gpu_rehearse.sh [--venv-only]     # from the repo root; log it: > /tmp/rehearse.log 2>&1
#
# 1. builds (or reuses) a Python 3.12 venv outside the repo, $REHEARSE_VENV (default
#    /tmp/rehearse-venv), with the versions of the one-H200 host the GPU script first ran on
#    (its `pip list`, 2026-11; docs/gpu-acceptance.md). Versions not recorded there take the newest
#    release (scipy 1.18). torch 2.11.0 from PyPI is the CUDA build (several GB): that is expected; it
#    runs on CPU all the same. About 5 GB on disk.
# 2. downloads into .whl/ the wheels that must travel to that machine (what it lacks: megatron-core,
#    mlperf-logging, diffusers, pydantic and its deps, torchao, ...), with bench/gpu_check.py's
#    command, and prints their size (kept under 20 MiB: a small copy to an offline host);
# 3. installs them exactly as docs/gpu-acceptance.md does on the GPU host (pip --no-index --no-deps --target, then
#    PYTHONPATH), so a wheel that is missing or clashes with the image shows here;
# 4. runs there the GPU check's CPU smoke (--device cpu --smoke) and every tiny size through
#    `mlperf run BENCH --system cpu-local --runs 1`, then `mlperf check` of each log.
# Exit: 0 all green, 1 a step failed (the failing step is the last line printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${REHEARSE_VENV:-/tmp/rehearse-venv}
SITE=${REHEARSE_SITE:-/tmp/rehearse-site}
WORK=${REHEARSE_WORK:-/tmp/rehearse-work}
PY312=${PY312:-$(command -v python3.12 || true)}
[ -n "$PY312" ] && "$PY312" --version >/dev/null 2>&1 || PY312=$(ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)

# The check machine's versions (its pip list). torch's own deps (triton 3.6.0, nvidia-*) follow torch.
MACHINE=(
  torch==2.11.0 torchvision==0.26.0 transformers==5.17.0 tokenizers==0.23.2 huggingface_hub==1.33.0
  safetensors==0.8.0 accelerate==1.15.0 torch-geometric==2.8.0.post1 numpy==2.5.2 torchmetrics==1.9.0
  sentencepiece==0.2.2 'scipy>=1.18,<1.19' peft
  # in the image, version not recorded: the newest
  click rich pyyaml pandas pyarrow matplotlib psutil scikit-learn pillow packaging filelock regex
  requests tqdm einops pytest pytest-xdist zipp
)
# What the machine lacks (or holds in a version the project does not take: peft, whose version
# there is not recorded) and must travel in .whl/ (cp312, manylinux x86-64; one version each).
# The same list as bench/gpu_check.py's docstring.
TRAVEL=(
  megatron-core==0.19.2 mlperf-logging==4.1.68 diffusers==0.42.1 importlib-metadata==8.7.0
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0 peft==0.21.2 torchao==0.17.0
)
# KINDS.md's list of the Python packages in the machine's image (2026-11-17): the venv is pruned to
# these, so a dependency pulled in here (pydantic, by some package's requirements) but absent
# there cannot hide a wheel missing from TRAVEL.
IMAGE="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings
cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils
execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet
httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax
jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib
mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver
nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13
nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx
optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp"

step() { echo "== $(date +%H:%M:%S) $*"; }

step "venv $VENV ($("$PY312" --version))"
if ! "$VENV/bin/python" -c 'import torch, transformers, torch_geometric, scipy, peft' 2>/dev/null; then
  "$PY312" -m venv "$VENV"
  # PIP_CONSTRAINT= : this machine's pip caps torch at the local CPU releases; the rehearsal wants 2.11.0.
  PIP_CONSTRAINT= "$VENV/bin/python" -m pip install -q --no-cache-dir "${MACHINE[@]}"
fi
# Prune what the image does not hold (names compared the way pip normalises them).
extra=$("$VENV/bin/python" - "$IMAGE" <<'PY'
import re, sys
from importlib.metadata import distributions
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
image = {norm(n) for n in sys.argv[1].split()}
have = {norm(d.metadata["Name"]) for d in distributions()}
# torch's own CUDA libraries are the image's too, under its names; keep whatever torch pulled in
keep = lambda n: n.startswith(("nvidia-", "cuda-")) or n == "triton"
print(" ".join(sorted(n for n in have - image if not keep(n))))
PY
)
[ -n "$extra" ] && { echo "  not in the image, removed: $extra"; "$VENV/bin/python" -m pip uninstall -q -y $extra; }
"$VENV/bin/python" -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|torch.geometric|numpy|scipy|peft|safetensors|accelerate|triton) '
[ "${1:-}" = "--venv-only" ] && exit 0

step "wheels that travel -> .whl/"
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || { [ -d .git ] && echo /.whl/ >>.git/info/exclude; } || true
rm -rf .whl && mkdir -p .whl
"$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${TRAVEL[@]}"
ls -l .whl | awk 'NR>1 {printf "  %8.2f MiB  %s\n", $5/2^20, $9}'
du -cb .whl/*.whl | awk 'END {printf "  %8.2f MiB  in all (budget 20 MiB)\n", $1/2^20; if ($1 > 20*2^20) exit 1}'

step "install as docs/gpu-acceptance.md does (--no-index --no-deps --target $SITE)"
rm -rf "$SITE"
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" .whl/*.whl
export PYTHONPATH=$SITE  # as on the GPU host; bench/gpu/runs.py adds the repo for its children
PY="$VENV/bin/python"
"$PY" -c 'import megatron.core, mlperf_logging, diffusers, pydantic, torchao, harness; print("  imports ok; harness from", harness.__file__)'
"$PY" -m pip check 2>&1 | sed 's/^/  pip check: /' || true

step "GPU check, CPU smoke"
rm -rf "$WORK" && mkdir -p "$WORK"
OMP_NUM_THREADS=1 "$PY" bench/gpu_check.py --device cpu --smoke --out "$WORK/smoke" --parallel 1

fails=0
rm -rf "$WORK/results"
for bench in gpt3 llama2_70b_lora gnn stable_diffusion; do
  step "mlperf run $bench --system cpu-local --runs 1"
  if PYTHONPATH=$SITE:$ROOT "$PY" -m harness.cli run "$bench" --system cpu-local --runs 1 --results-dir "$WORK/results" \
    && PYTHONPATH=$SITE:$ROOT "$PY" -m harness.cli check "$WORK/results/MyOrg/results/cpu-local/$bench/result_0.txt"; then
    echo "  ok: $bench"
  else
    echo "  FAILED: $bench"
    fails=$((fails + 1))
  fi
done
step "done: $fails of 4 tiny runs failed"
[ "$fails" = 0 ]
