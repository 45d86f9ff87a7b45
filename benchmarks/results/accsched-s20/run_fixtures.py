"""Run the LC303 process-count fixtures and their must-not-flag twins on CPU (`torchrun --nproc_per_node 2
run_fixtures.py`, and `python run_fixtures.py` for one process), with a short horizon, and print how many
times each scheduler was stepped against its horizon and where the LR ends. diffusers is not installed here:
its `get_scheduler` is stood in for by transformers' (the same schedules).

Trainer fixtures: 8 optimizer steps (`steps=8`), linear decay from 1.0 to 0.1 of the LR over the horizon.
Script fixtures: `--max_train_steps 8 --lr_scheduler linear --lr_warmup_steps 0`, linear decay to 0.
"""
import importlib.util
import os
import sys
import types
import warnings
from pathlib import Path

os.environ.setdefault("ACCELERATE_USE_CPU", "true")  # the fixtures build `Accelerator(...)` without `cpu=True`

import transformers  # noqa: E402
from accelerate.state import AcceleratorState, GradientState  # noqa: E402

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[3]
sys.modules["diffusers"] = types.ModuleType("diffusers")
sys.modules["diffusers.optimization"] = types.SimpleNamespace(get_scheduler=transformers.get_scheduler)


def load(rel: str):
    spec = importlib.util.spec_from_file_location(Path(rel).stem, ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fresh() -> None:
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def trainer(rel: str) -> str:
    fresh()
    fixture = load(rel)
    t = fixture.Trainer(fixture.TrainerConfig(fixture.OptimizationConfig(steps=8)))
    t.train()
    inner = t._lr_scheduler.scheduler
    lr = inner.get_last_lr()[0] / t._config.optimization.learning_rate
    return f"{rel}: scheduler steps={inner.last_epoch} horizon={inner.total_iters} final LR {lr:.2f} of its peak"


def script(rel: str) -> str:
    fresh()
    fixture = load(rel)
    seen = {}
    real = transformers.get_scheduler

    def keep(*args, **kwargs):
        seen["scheduler"] = real(*args, **kwargs)
        seen["horizon"] = kwargs["num_training_steps"]
        return seen["scheduler"]

    sys.modules["diffusers.optimization"].get_scheduler = keep
    fixture.get_scheduler = keep
    sys.argv = ["train.py", "--max_train_steps", "8", "--lr_scheduler", "linear", "--lr_warmup_steps", "0"]
    if "--gradient_accumulation_steps" in (ROOT / rel).read_text():
        sys.argv += ["--gradient_accumulation_steps", "1"]  # N=1: the process count's effect alone
    fixture.main()
    s = seen["scheduler"]
    lr = s.get_last_lr()[0] / s.base_lrs[0]
    return f"{rel}: scheduler steps={s.last_epoch} horizon={seen['horizon']} final LR {lr:.2f} of its peak"


if __name__ == "__main__":
    lines = [
        trainer("rules/fixtures/LC303/accelerate_prepared_scheduler_horizon_per_process_steps.py"),
        trainer("tests/fixtures/must_not_flag/accelerate_prepared_scheduler_split_batches.py"),
        trainer("tests/fixtures/must_not_flag/accelerate_prepared_scheduler_horizon_times_processes_in_trainer.py"),
        script("rules/fixtures/LC303/accelerate_discarded_scheduler_horizon_times_processes.py"),
        script("tests/fixtures/must_not_flag/accelerate_discarded_scheduler_horizon_in_updates.py"),
    ]
    if AcceleratorState().process_index == 0:
        print(f"P={AcceleratorState().num_processes}")
        print("\n".join(lines))
    sys.stdout.flush()
    os._exit(0)  # five Accelerator states torn down by hand leave gloo threads that abort a normal exit
