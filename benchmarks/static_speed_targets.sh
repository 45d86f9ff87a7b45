#!/bin/bash
# The four static speed targets of one checkout, in one go, on the machine as it is:
# cold check of the speed and broad corpora interleaved with `ruff check --select ALL`,
# warm re-run of the speed corpus, one training script alone.  Each line is
# "<what> r<round> user U sys S wall W" (/usr/bin/time; CPU = user + sys, workers included).
#
#   bash benchmarks/static_speed_targets.sh CHECKOUT OUTFILE
#
# The broad corpus's JSON report (the field test's findings) is left in OUTFILE.broad.json.
# SPEED, BROAD, SCRIPT and RUFF may point elsewhere (defaults: this workspace's corpora).
set -u
checkout=$(cd "$1" && pwd); out=$(realpath -m "$2")
SPEED=${SPEED:-/work/corpus/speed}
BROAD=${BROAD:-/work/corpus/broad}
SCRIPT=${SCRIPT:-/work/corpus/karpathy+nanoGPT/train.py}
RUFF=${RUFF:-ruff}
export PYTHONPATH=$checkout
err=$(mktemp)
timed() {  # timed LABEL COMMAND...: run, append the timing line to $out
    local label=$1; shift
    /usr/bin/time -o "$err" -f "$label user %U sys %S wall %e" "$@" >/dev/null 2>&1
    grep -v '^Command exited' "$err" >> "$out"  # loopcheck and ruff exit 1 on findings
}
{ cd / && python -c "import loopcheck; print('loopcheck from', loopcheck.__file__)"; uptime; } > "$out"
cd "$SPEED"
for r in 1 2 3 4 5; do
    timed "loopcheck speed r$r" python -m loopcheck check --no-cache --jobs 2 .
    timed "ruff speed r$r" "$RUFF" check --isolated --select ALL --no-cache .
done
python -m loopcheck check --jobs 2 . >/dev/null 2>&1  # fill the cache
for r in 1 2 3 4 5; do
    timed "loopcheck speed warm r$r" python -m loopcheck check --jobs 2 .
done
for r in 1 2 3 4 5; do
    timed "single-file r$r" python -m loopcheck check --no-cache "$SCRIPT"
    timed "single-file with-pyc r$r" env -u PYTHONDONTWRITEBYTECODE python -m loopcheck check --no-cache "$SCRIPT"
done
cd "$BROAD"
for r in 1 2; do
    timed "loopcheck broad r$r" sh -c "python -m loopcheck check --no-cache --jobs 2 \
        --output-format json --exit-zero . > '$out.broad.json'"
    timed "ruff broad r$r" "$RUFF" check --isolated --select ALL --no-cache .
done
uptime >> "$out"
rm -f "$err"
