#!/usr/bin/env bash
# Run HERE (a machine with network and the project's venv), before the one call that runs the GPU
# check on the lent device machine: that machine has Python 3.12 with torch, transformers,
# accelerate, tokenizers and safetensors but no network, and each call carries at most 64 MiB of
# files. This writes .whl/ (git-ignored): lceval as a wheel, the few dependencies the device lacks
# (jsonschema and its parts, platformdirs) and transformers and regex at the versions the tests
# here use (the device's own transformers is older), all for CPython 3.12 on x86-64; then checks
# that the wheels and the tracked files together fit in 64 MiB. benchmarks/gpu_device_run.sh
# installs them there. Usage: bash benchmarks/gpu_device_prepare.sh   (PYTHON=... to pick the python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PINS=(jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
      platformdirs==4.14.8 transformers==5.24.0 regex==2026.11.19)
rm -rf .whl
mkdir .whl
"$PY" -m pip wheel -q --no-deps --no-build-isolation . -w .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${PINS[@]}"
wheels=$(du -cb .whl/*.whl | tail -n 1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
untracked=$(git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -n 1 | cut -f1)
total=$((wheels + tree + ${untracked:-0}))
ls -l .whl
echo "wheels $((wheels / 1024)) KiB + tracked files $((tree / 1024)) KiB + untracked $((${untracked:-0} / 1024)) KiB = $((total / 1024)) KiB of 65536 KiB"
[ "$total" -le $((64 * 1024 * 1024)) ] || { echo "over the 64 MiB a device call carries" >&2; exit 1; }
