#!/bin/bash
# The prepared accelerator check (bench/device_check.py), for one `device` tool call
# from the repository root on a lent GPU machine, which has torch with CUDA but cannot
# reach a package registry. Carry the wheels of what its image lacks (pymetis), made
# here once:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl pymetis==2025.2.2
# then call: run(command="bash bench/device_check.sh", carry=[".whl"], timeout_s=540)
# and commit $OUT/device_check.json as bench/results/device_check.json.
set -euo pipefail
export PYTHONUNBUFFERED=1
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site "$repo"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
# From outside the checkout, so that the installed package (with gnnpipe.data and
# gnnpipe.partition where pyproject.toml maps them) is the one imported; bench/ from it.
cd /tmp && PYTHONPATH="/tmp/site:$repo" python3 -m bench.device_check --out "${OUT:-/tmp}/device_check.json" "$@"
