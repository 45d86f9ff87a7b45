#!/bin/sh
# Run the per-epoch and loader-length LC303 fixtures and their must-not-flag twins on one and two CPU (gloo) processes; each
# prints where its LR ends and how many times the wrapped scheduler was stepped (rank 0 shown).
# Run from the repository root: sh benchmarks/results/accsched-s20b/run_fixtures.sh
export ACCELERATE_USE_CPU=true OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
PY=${PY:-/work/venv/bin/python}
TORCHRUN=${TORCHRUN:-/work/venv/bin/torchrun}
for f in rules/fixtures/LC303/accelerate_prepared_epoch_horizon_stepped_per_epoch.py \
         rules/fixtures/LC303/accelerate_prepared_epoch_horizon_epoch_function.py \
         tests/fixtures/must_not_flag/accelerate_epoch_scheduler_left_out_of_prepare.py \
         tests/fixtures/must_not_flag/accelerate_epoch_scheduler_not_stepped_with_optimizer.py \
         rules/fixtures/LC303/accelerate_scheduler_prepared_after_loader_length.py \
         rules/fixtures/LC303/accelerate_accumulate_max_steps_from_prepared_loader.py \
         tests/fixtures/must_not_flag/accelerate_scheduler_after_loader_length_left_unprepared.py \
         tests/fixtures/must_not_flag/accelerate_max_steps_from_prepared_loader_times_processes.py; do
  echo "== $f"
  echo "  1 process:   $($PY "$f" 2>/dev/null | sort -u)"
  echo "  2 processes: $($TORCHRUN --nproc_per_node 2 --local-ranks-filter 0 "$f" 2>/dev/null | sort -u)"
done
