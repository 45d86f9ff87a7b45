#!/bin/bash
# Wheels that benchmarks/gpu/runtime.sh needs on the device image (pytest, py-spy), for Python
# 3.12 on x86-64, into .whl/ (git-ignored: add `/.whl/` to .git/info/exclude) to be carried.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-common-dir)/info/exclude"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl \
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.19.2 py-spy==0.4.3
ls .whl
