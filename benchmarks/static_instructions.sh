#!/bin/bash
# Instructions executed (valgrind cachegrind, "I refs") by a whole no-cache `loopcheck check` of
# one checkout: the speed corpus, and nanoGPT's train.py alone. Unlike CPU seconds on a shared
# machine, the count barely moves between runs (the speed corpus: within 0.001%), so a change of a
# few percent shows. The check runs in one process: the jobs the workers would take run in it
# (valgrind reports no count for a worker that is killed at the end, as loopcheck's are), with the
# workers' garbage-collector setting. Each run takes about a minute. Then the command as run, for
# the fixed cost of one invocation (see below).
#
#   bash benchmarks/static_instructions.sh CHECKOUT [LABEL]
#
# Use a Python that imports loopcheck from CHECKOUT with PYTHONPATH (an editable install of
# another checkout is overridden by it; check the first line printed). SPEED and SCRIPT may point
# elsewhere.
set -u
checkout=$(cd "$1" && pwd); label=${2:-$(basename "$checkout")}
SPEED=${SPEED:-/work/corpus/speed}
SCRIPT=${SCRIPT:-/work/corpus/karpathy+nanoGPT/train.py}
export PYTHONHASHSEED=0 PYTHONPATH=$checkout
(cd / && python -c "import loopcheck; print('loopcheck from', loopcheck.__file__)")
# The harness imports loopcheck's modules itself: without __pycache__ (a fresh archive, with
# PYTHONDONTWRITEBYTECODE set) each run would also count compiling them, ~36 M instructions on the
# single file, so one checkout measured with and one without are not comparable. Count running.
python -m compileall -q "$checkout/loopcheck" >/dev/null
harness=$(mktemp --suffix=.py)
cat > "$harness" <<'PY'
import gc
import sys

gc.set_threshold(2_000_000)  # as loopcheck.workers sets it in a worker
import loopcheck.workers

loopcheck.workers.can_isolate = lambda: False  # the jobs run in this process
from loopcheck.cli import entry

sys.argv = ["loopcheck", *sys.argv[1:]]
entry()
PY
count() {  # count LABEL DIRECTORY ARGS...: the instructions of `loopcheck check --no-cache ARGS` there
    local what=$1 dir=$2; shift 2
    local log; log=$(mktemp)
    (cd "$dir" && valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null --log-file="$log" \
        python "$harness" check --no-cache "$@" >/dev/null 2>&1)
    echo "$label $what instructions $(grep -o 'I *refs: *[0-9,]*' "$log" | tr -dc '0-9')"
    rm -f "$log"
}
count speed "$SPEED" --jobs 1 .
count single-file "$(dirname "$SCRIPT")" "$(basename "$SCRIPT")"
rm -f "$harness"
# The command as run (no harness): the process the command starts, with Python's own collector
# settings (a worker's share is not in it: its count is not reported). A warm re-run of the speed
# corpus starts no worker (every file's result is cached, in a cache directory of its own, filled
# first); for one script alone this is the import and start-up the worker's check waits on.
command() {  # command LABEL DIRECTORY ARGS...
    local what=$1 dir=$2; shift 2
    local log; log=$(mktemp)
    (cd "$dir" && valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null --log-file="$log" \
        python -m loopcheck check "$@" >/dev/null 2>&1)
    echo "$label $what instructions $(grep -o 'I *refs: *[0-9,]*' "$log" | tr -dc '0-9')"
    rm -f "$log"
}
LOOPCHECK_CACHE_DIR=$(mktemp -d); export LOOPCHECK_CACHE_DIR
(cd "$SPEED" && python -m loopcheck check --jobs 2 . >/dev/null 2>&1)  # fill the cache
command warm-rerun-command "$SPEED" --jobs 2 .
(cd "$(dirname "$SCRIPT")" && python -m loopcheck check --no-cache "$(basename "$SCRIPT")" >/dev/null 2>&1)
command single-file-command "$(dirname "$SCRIPT")" --no-cache "$(basename "$SCRIPT")"
rm -rf "$LOOPCHECK_CACHE_DIR"
