#!/bin/bash
# The runtime checker on a GPU machine, in one go (at most about 9 minutes; each part has a timeout):
#  (a) tests/runtime/test_gpu.py and tests/runtime/test_distributed.py (2 ranks with NCCL), then
#      two distributed scenarios under torchrun on every visible GPU (4 on a 4-GPU machine);
#  (b) overhead as a user sees it, `python train.py` vs `loopcheck run train.py` vs the loop in
#      watch(), separate processes in alternating rounds, steady state after warm-up, for a
#      launch-bound and a GPU-bound workload (benchmarks/gpu/runtime_overhead.py);
#  (c) py-spy on the host: where loopcheck's host time goes in the launch-bound loop.
# PARTS selects what runs (default "tests gpus overhead pyspy"); with TARBALL=1 the output folder is
# also packed into $OUT/runtime-<parts>.tgz (the device returns only a few files).
# Writes everything to $OUT (or the first argument). torch comes from the machine; loopcheck
# from this checkout (PYTHONPATH). pytest and py-spy are not on the device image: carry them as
# wheels in .whl/ (benchmarks/gpu/fetch_wheels.sh makes that folder; call with carry [".whl"]).
set -uo pipefail
out=${1:-${OUT:?set OUT or pass an output folder}}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "gpus", torch.cuda.device_count())'
  echo "cpus $(nproc)"; git log -1 --format='loopcheck commit %H' 2>/dev/null; } > "$out/devices.txt" 2>&1
cat "$out/devices.txt"
parts=" ${PARTS:-tests gpus overhead pyspy} "
want() { [[ $parts == *" $1 "* ]]; }
start=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - start )) s" | tee -a "$out/timings.txt"; }

if want tests; then
stamp "tests"
timeout 180 python3 -m pytest tests/runtime/test_gpu.py tests/runtime/test_distributed.py -q -rs \
    -p no:cacheprovider --basetemp=/tmp/pt 2>&1 | tee "$out/tests.log"
fi

if want gpus; then
stamp "every visible GPU"
# the pytest scenarios run 2 ranks; here two of them run on every visible GPU at once
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
for scenario in ddp_ok_no_sync ddp_lc501_without_no_sync; do
    timeout 60 torchrun --standalone --nproc_per_node="$gpus" --no-python python3 -m loopcheck run \
        --report "$out/all-gpus/$scenario.json" "runtime/$scenario.py" > "$out/all-gpus-$scenario.log" 2>&1
    echo "$scenario on $gpus GPUs: exit $?" | tee -a "$out/all-gpus.txt"
    grep -E "merged report|problem|LC50|finding" "$out/all-gpus-$scenario.log" | tee -a "$out/all-gpus.txt"
done
fi

if want overhead; then
stamp "overhead launch-bound"
timeout 260 python3 benchmarks/gpu/runtime_overhead.py --workload launch --rounds 8 --steps 300 --warmup 60 \
    --out "$out/overhead-launch.json" 2>&1 | tee "$out/overhead-launch.log"
stamp "overhead GPU-bound"
timeout 150 python3 benchmarks/gpu/runtime_overhead.py --workload gpu --rounds 4 --steps 30 --warmup 8 \
    --out "$out/overhead-gpu.json" 2>&1 | tee "$out/overhead-gpu.log"
fi

if want pyspy; then
stamp "py-spy"
if command -v py-spy > /dev/null; then
    for variant in plain run; do
        if [ $variant = run ]; then cmd=(python3 -m loopcheck run -q); else cmd=(python3); fi
        timeout 35 py-spy record --rate 1000 --nonblocking --format raw -o "$out/pyspy-launch-$variant.txt" -- \
            "${cmd[@]}" benchmarks/gpu/runtime_train.py --workload launch --steps 1500 --warmup 60 \
            > "$out/pyspy-launch-$variant.log" 2>&1
    done
    # host samples inside loopcheck's own frames, per function (raw format: stack;stack;... count)
    python3 - "$out" <<'PY' 2>&1 | tee "$out/pyspy-summary.txt"
import collections, pathlib, sys
out = pathlib.Path(sys.argv[1])
for variant in ("plain", "run"):
    path = out / f"pyspy-launch-{variant}.txt"
    if not path.exists():
        continue
    total, ours, where = 0, 0, collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        frames = [f for f in stack.split(";") if "loopcheck/runtime" in f]
        if frames:
            ours += int(count)
            where[frames[0]] += int(count)
    print(f"{variant}: {total} samples, {ours} ({100 * ours / max(total, 1):.1f}%) with a loopcheck frame")
    for frame, count in where.most_common(15):
        print(f"  {count:6d}  {frame}")
PY
else
    echo "py-spy is not installed: carry its wheel in .whl/ (benchmarks/gpu/fetch_wheels.sh)" | tee "$out/pyspy-summary.txt"
fi
fi
stamp "done"
if [ "${TARBALL:-0}" = 1 ] && [ -n "${OUT:-}" ]; then
    tag=$(echo $parts | tr ' ' '-')
    tar czf "$OUT/runtime-$tag.tgz" -C "$out" .
fi
