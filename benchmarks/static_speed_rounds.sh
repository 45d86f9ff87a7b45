#!/bin/bash
# Cold checks of the speed corpus by two checkouts and by `ruff check --select ALL`, interleaved
# round by round (so that a change in the machine's load hits all three alike), then the median CPU
# (user + sys, workers included) of each and the median of each checkout's per-round ratio to ruff.
#
#   bash benchmarks/static_speed_rounds.sh BEFORE AFTER OUTFILE [ROUNDS]
#
# BEFORE and AFTER are checkouts (e.g. `git archive` extracts); each runs as `python -m loopcheck`
# with PYTHONPATH pointing at it, so use a Python without an editable loopcheck installed.
# SPEED and RUFF may point elsewhere (defaults: this workspace's corpus, `ruff` on PATH).
set -u
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd); out=$(realpath -m "$3"); rounds=${4:-12}
SPEED=${SPEED:-/work/corpus/speed}
RUFF=${RUFF:-ruff}
err=$(mktemp)
for checkout in "$before" "$after"; do
    (cd / && PYTHONPATH=$checkout python -c "import loopcheck; print('loopcheck from', loopcheck.__file__)")
done > "$out"
uptime >> "$out"
cd "$SPEED"
for checkout in "$before" "$after"; do  # once each first: the module-code cache of a fresh extract
    PYTHONPATH=$checkout python -m loopcheck check --no-cache --jobs 2 . >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
    for label in before after ruff; do
        case $label in
            before) command=(env PYTHONPATH="$before" python -m loopcheck check --no-cache --jobs 2 .) ;;
            after) command=(env PYTHONPATH="$after" python -m loopcheck check --no-cache --jobs 2 .) ;;
            ruff) command=("$RUFF" check --isolated --select ALL --no-cache .) ;;
        esac
        /usr/bin/time -o "$err" -f "$label r$r user %U sys %S wall %e" "${command[@]}" >/dev/null 2>&1
        grep -v '^Command exited' "$err" >> "$out"  # loopcheck and ruff exit 1 on findings
    done
done
uptime >> "$out"
rm -f "$err"
python - "$out" <<'EOF' | tee -a "$out"
import statistics
import sys

cpu: dict[str, list[float]] = {}
for line in open(sys.argv[1]):
    words = line.split()
    if len(words) == 8 and words[2] == "user":
        cpu.setdefault(words[0], []).append(float(words[3]) + float(words[5]))
for label in ("before", "after"):
    ratios = sorted(a / b for a, b in zip(cpu[label], cpu["ruff"]))
    print(f"{label}: median CPU {statistics.median(cpu[label]):.2f} s, median ratio to ruff "
          f"{statistics.median(ratios):.2f}x (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}x)")
print(f"ruff: median CPU {statistics.median(cpu['ruff']):.2f} s over {len(cpu['ruff'])} rounds")
EOF
