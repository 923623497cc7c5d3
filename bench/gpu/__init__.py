"""The parts of `bench/gpu_check.py`: FLOP arithmetic and peaks (flops.py), timing (timing.py), an FP8
linear through `torch._scaled_mm` (fp8.py), the GPT-3 and Llama 2 LoRA layer figures (layers.py), the
SD UNet and R-GAT steps (steps.py), and the GPU tests plus tiny `mlperf run`s (runs.py)."""
