#!/bin/bash
# The fixed cost of one `loopcheck check`, for two checkouts: the warm re-run of the speed corpus
# (every file's result cached) and one training script alone (--no-cache), in blocks per checkout
# (BEFORE, AFTER, BEFORE, AFTER), each block after one untimed run. Each checkout has its own cache
# directory, so neither rewrites the other's kept code or results between its runs. ruff's own time
# on the speed corpus, before and after the blocks, says how loaded the host was. Each line is
# "<label> <what> user U sys S wall W" (/usr/bin/time).
#
#   bash benchmarks/static_speed_fixed.sh BEFORE AFTER OUTFILE [RUNS]   (RUNS per block, default 6)
#
# SPEED, SCRIPT and RUFF may point elsewhere (defaults: this workspace's corpora).
set -u
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd); out=$(realpath -m "$3"); runs=${4:-6}
SPEED=${SPEED:-/work/corpus/speed}
SCRIPT=${SCRIPT:-/work/corpus/karpathy+nanoGPT/train.py}
RUFF=${RUFF:-ruff}
cache=$(mktemp -d)
err=$(mktemp)
timed() {  # timed LABEL COMMAND...: run, append the timing line to $out
    local label=$1; shift
    /usr/bin/time -o "$err" -f "$label user %U sys %S wall %e" "$@" >/dev/null 2>&1
    grep -v '^Command exited' "$err" >> "$out"  # loopcheck and ruff exit 1 on findings
}
ruff_rounds() {
    (cd "$SPEED" && for r in 1 2 3; do timed "ruff speed $1" "$RUFF" check --isolated --select ALL --no-cache .; done)
}
block() {  # block LABEL CHECKOUT
    local label=$1 checkout=$2
    export PYTHONPATH=$checkout LOOPCHECK_CACHE_DIR=$cache/$label
    (cd "$SPEED" && python -m loopcheck check --jobs 2 . >/dev/null 2>&1  # fill the cache
     for r in $(seq "$runs"); do timed "$label warm" python -m loopcheck check --jobs 2 .; done)
    (cd "$(dirname "$SCRIPT")" && python -m loopcheck check --no-cache "$(basename "$SCRIPT")" >/dev/null 2>&1
     for r in $(seq "$runs"); do timed "$label single" python -m loopcheck check --no-cache "$(basename "$SCRIPT")"; done)
}
{ for c in "$before" "$after"; do (cd / && PYTHONPATH=$c python -c "import loopcheck; print('loopcheck from', loopcheck.__file__)"); done
  uptime; } > "$out"
ruff_rounds start
for label in before after before after; do
    block "$label" "$([ "$label" = before ] && echo "$before" || echo "$after")"
done
ruff_rounds end
uptime >> "$out"
python3 - "$out" <<'PY'
import statistics, sys
from collections import defaultdict
walls, cpus = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    words = line.split()
    if "wall" in words and "user" in words:
        what = " ".join(words[:words.index("user")])
        walls[what].append(float(words[-1]))
        cpus[what].append(float(words[words.index("user") + 1]) + float(words[words.index("sys") + 1]))
with open(sys.argv[1], "a") as out:
    for what in walls:
        out.write(f"# {what}: median wall {statistics.median(walls[what]):.3f} s, median CPU "
                  f"{statistics.median(cpus[what]):.3f} s ({len(walls[what])} runs)\n")
PY
rm -rf "$cache" "$err"
