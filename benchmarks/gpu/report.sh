#!/bin/bash
# The HTML run report on a real GPU job: a small GPT-style model (4 layers, d=256) trained with
# accumulation 4 and float16 autocast + GradScaler, 200 optimizer steps, twice under
# `loopcheck run --html`: once correct, once with optimizer.zero_grad() inside the window and every
# loss kept with its graph (LC101, LC601). Writes correct.{html,json,log}, pitfall.{html,json,log},
# devices.txt and timings.txt to $OUT (or the first argument). torch comes from the machine;
# loopcheck from this checkout (PYTHONPATH). About a minute on one H100.
# Then, locally: python benchmarks/report_screenshot.py OUT/pitfall.html benchmarks/results/report-gpu-pitfall.png
set -uo pipefail
out=${1:-${OUT:?set OUT or pass an output folder}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])';
  git log -1 --format='loopcheck commit %H' 2>/dev/null; } > "$out/devices.txt" 2>&1
: > "$out/timings.txt"
for run in correct:none pitfall:zero-grad-in-window; do
    name=${run%%:*} pitfall=${run#*:}
    start=$(date +%s.%N)
    timeout 150 python3 -m loopcheck run --report "$out/$name.json" --html "$out/$name.html" --no-progress \
        benchmarks/gpu/report_gpt.py --pitfall "$pitfall" > "$out/$name.log" 2>&1
    code=$?
    echo "$name exit $code wall $(awk "BEGIN {print $(date +%s.%N) - $start}") s" >> "$out/timings.txt"
    python3 -m loopcheck report show "$out/$name.json" --color never --no-charts > "$out/$name.summary.txt" 2>&1
done
cat "$out/timings.txt"
