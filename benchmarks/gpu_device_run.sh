#!/usr/bin/env bash
# Runs ON the lent device machine (one NVIDIA GPU, Python 3.12 with torch, no network), in the
# repository's root, with .whl/ carried (benchmarks/gpu_device_prepare.sh made it): installs the
# wheels into /tmp/site, puts it first on PYTHONPATH and runs the GPU check, its output also in
# $OUT/gpu_check.log and $OUT/gpu_check.json. Arguments go to benchmarks/gpu_check.py, or with
# CHECK=gpu_long_context to benchmarks/gpu_long_context.py (RULER at 128k and 512k, RoPE-scaled;
# its output in $OUT/gpu_long_context.log and .json). Both import benchmarks/gpu_machine.py from
# beside them: a tracked file, so every call carries it. The calls (docs/performance.md, "The GPU check"):
#   run(command="bash benchmarks/gpu_device_run.sh", carry=[".whl"], timeout_s=600)
#   run(command="CHECK=gpu_long_context bash benchmarks/gpu_device_run.sh", carry=[".whl"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
CHECK=${CHECK:-gpu_check}
python3 "benchmarks/$CHECK.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/$CHECK.log"
