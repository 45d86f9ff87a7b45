#!/usr/bin/env bash
# A newcomer's first hour, scripted: clone loopcheck, then run, exactly as the README writes them,
#   1. the quickstart command (install, check the shipped examples),
#   2. the test command (install with the test extra, run the whole suite),
#   3. the pre-commit snippet in a new training repository (a buggy commit refused, the fix accepted),
#   4. the GitHub Actions example's install step and loopcheck steps in that repository.
# The README's repository URL is replaced by the clone (nothing is published yet) and its pinned
# commit by the clone's HEAD; everything else is taken from the README as written. Each part runs in
# a virtual environment of its own.
#
#   bash benchmarks/fresh_clone.sh [REPO] > benchmarks/results/fresh-clone.md
#
# REPO: what to clone (default: this checkout). Prints a markdown log; exits 1 if a step fails.
set -uo pipefail

repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/loopcheck-fresh-XXXXXX)
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}
failed=0

step() {  # step TITLE COMMAND: run COMMAND in bash, log it, its last lines and the verdict
    # (EXPECT=N: the exit status that means success; TAIL=N: how many lines of output to show)
    local title=$1 command=$2 start=$SECONDS status
    echo "## $title"
    echo
    echo '```console'
    echo "\$ $command"
    bash -c "$command" > "$work/out.log" 2>&1
    status=$?
    tail -n "${TAIL:-12}" "$work/out.log"
    echo '```'
    echo
    if [ "$status" -eq "${EXPECT:-0}" ]; then
        echo "exit $status, $((SECONDS - start)) s: **ok**"
    else
        echo "exit $status, $((SECONDS - start)) s: **FAILED**"
        failed=1
    fi
    echo
}

readme() {  # readme WHAT [ARGS]: a piece of the clone's README.md (see benchmarks/readme_parts.py)
    "$python" "$(dirname "$0")/readme_parts.py" "$work/clone/README.md" "$@"
}

echo "# Fresh clone: the README's commands, the pre-commit snippet and the Actions example"
echo
echo "Run $(date -u +%Y-%m-%dT%H:%MZ) by \`bash benchmarks/fresh_clone.sh\`; $("$python" --version 2>&1),"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)."
echo

git clone -q "$repo" "$work/clone" || { echo "cannot clone $repo"; exit 1; }
rev=$(git -C "$work/clone" rev-parse HEAD)
echo "Cloned \`$repo\` at \`$rev\` into a temporary directory."
echo

quickstart=$(readme quickstart)
tests=$(readme tests)
for env in quickstart tests actions; do "$python" -m venv "$work/venv-$env"; done

# 1 and 2. The quickstart checks examples that have pitfalls in them: exit 1 with the findings is right.
EXPECT=1 step "1. Quickstart, as the README writes it" \
    "cd '$work/clone' && . '$work/venv-quickstart/bin/activate' && $quickstart"
TAIL=6 step "2. Tests, as the README writes them" \
    "cd '$work/clone' && . '$work/venv-tests/bin/activate' && $tests"

# 3. pre-commit in a new training repository, with the README's snippet.
project="$work/training-repo"
mkdir -p "$project"
git -C "$project" init -q
git -C "$project" config user.email dev@example.com
git -C "$project" config user.name dev
readme precommit "$work/clone" "$rev" > "$project/.pre-commit-config.yaml"
cp "$work/clone/examples/accumulation_zero_grad_every_batch.py" "$project/train.py"
export PRE_COMMIT_HOME="$work/pre-commit-cache" PRE_COMMIT_COLOR=never
step "3a. pre-commit install (the README's snippet; repo: the clone, rev: its HEAD)" \
    "cd '$project' && cat .pre-commit-config.yaml && '$work/venv-tests/bin/pre-commit' install"
TAIL=20 step "3b. A commit with a training-loop bug is refused" \
    "cd '$project' && git add . && ! git commit -m 'accumulate' && test -z \"\$(git rev-list --all)\""
cp "$work/clone/examples/accumulation_correct.py" "$project/train.py"
step "3c. The fixed file commits" "cd '$project' && git add . && git commit -m 'accumulate correctly'"

# 4. The Actions workflow's install step and loopcheck steps, in the same repository, once a file
#    with known findings has been recorded in the baseline (the README's one-time step).
cp "$work/clone/examples/accumulation_zero_grad_every_batch.py" "$project/legacy.py"
mapfile -t runs < <(readme actions "$work/clone" "$rev")
step "4a. Actions: ${runs[0]}" "cd '$project' && . '$work/venv-actions/bin/activate' && ${runs[0]}"
step "4b. The one-time baseline" \
    "cd '$project' && '$work/venv-actions/bin/loopcheck' check --write-baseline loopcheck-baseline.json"
for run in "${runs[@]:1}"; do
    step "4c. Actions: $run" "cd '$project' && . '$work/venv-actions/bin/activate' && $run"
done
step "4d. The SARIF file the upload step names is SARIF 2.1.0" \
    "'$python' -c \"import json; d = json.load(open('$project/loopcheck.sarif')); assert d['version'] == '2.1.0'; print(len(d['runs'][0]['results']), 'results')\""

if [ "$failed" -eq 0 ]; then echo "**All steps passed.**"; else echo "**A step FAILED** (see above)."; fi
exit "$failed"
