"""LC501 on a model prepared by Accelerate holds only under a multi-process launch: where the project
documents launches of the script and every one is a plain ``python train.py`` (its shell scripts,
READMEs), Accelerate runs one process and wraps nothing, so there is nothing to all-reduce. A project
that launches the script with ``accelerate launch`` or ``torchrun``, that speaks of several GPUs
anywhere in those documents, or that documents no launch of the script, keeps the finding (its
message states the launch condition). The shape is a retention-model project's: manual accumulation
around ``accelerator.backward(loss)`` outside ``accumulate()``, run by ``CUDA_VISIBLE_DEVICES=3
python bert.py`` from the script's folder."""

from __future__ import annotations

from pathlib import Path

from tests.projects import write_project

ACCELERATE_MANUAL_ACCUMULATION = """
    import torch.nn.functional as F
    from accelerate import Accelerator


    def train(args, model, optimizer, train_dataloader):
        accelerator = Accelerator(fp16=args.fp16)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for epoch in range(args.num_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                logits = model(**batch)["logits"]
                loss = F.cross_entropy(logits, batch["labels"])
                accelerator.backward(loss)
                if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                    optimizer.step()
                    optimizer.zero_grad()
"""

SINGLE_GPU_SCRIPT = """
    CUDA_VISIBLE_DEVICES=3 python bert.py \\
    --batch_size 12 \\
    --gradient_accumulation_steps 4 \\
    --fp16
"""


def _lc501(run_cli, path: str, *options: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC501", *options, path)
    return [line for line in out.splitlines() if ": LC501" in line]


def test_every_documented_launch_runs_one_process(project: Path, run_cli) -> None:
    write_project(project, {"multi-class/bert.py": ACCELERATE_MANUAL_ACCUMULATION,
                            "multi-class/bert.sh": SINGLE_GPU_SCRIPT,
                            "README.md": "Train:\n\n```\ncd multi-class && bash bert.sh\n```\n"})
    assert _lc501(run_cli, "multi-class/bert.py") == []


def test_an_accelerate_launch_of_the_script_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"multi-class/bert.py": ACCELERATE_MANUAL_ACCUMULATION,
                            "multi-class/bert.sh": "accelerate launch --num_processes 4 bert.py --fp16\n"})
    assert len(_lc501(run_cli, "multi-class/bert.py")) == 1


def test_a_multi_process_launch_anywhere_keeps_the_finding(project: Path, run_cli) -> None:
    # one script runs on one GPU, but the README runs the project under torchrun
    write_project(project, {"bert.py": ACCELERATE_MANUAL_ACCUMULATION, "bert.sh": SINGLE_GPU_SCRIPT,
                            "docs/README.md": "```\ntorchrun --nproc_per_node 8 bert.py\n```\n"})
    assert len(_lc501(run_cli, "bert.py")) == 1


def test_prose_about_several_gpus_keeps_the_finding(project: Path, run_cli) -> None:
    write_project(project, {"bert.py": ACCELERATE_MANUAL_ACCUMULATION, "bert.sh": SINGLE_GPU_SCRIPT,
                            "README.md": "For multi-GPU training, configure Accelerate first.\n"})
    assert len(_lc501(run_cli, "bert.py")) == 1


def test_no_documented_launch_keeps_the_finding(project: Path, run_cli) -> None:
    # the scripts launch another file only (the name must match as a whole: distilbert.py is not bert.py)
    write_project(project, {"bert.py": ACCELERATE_MANUAL_ACCUMULATION, "run.sh": "python distilbert.py\n"})
    found = _lc501(run_cli, "bert.py")
    assert len(found) == 1 and "multi-process launch" in found[0]


def test_a_new_multi_process_launch_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"bert.py": ACCELERATE_MANUAL_ACCUMULATION, "bert.sh": SINGLE_GPU_SCRIPT})
    assert _lc501(run_cli, "bert.py") == []
    (project / "multi.sh").write_text("accelerate launch bert.py\n")
    assert len(_lc501(run_cli, "bert.py")) == 1  # from the cache, had the launches not been in its key
    (project / "multi.sh").unlink()
    assert _lc501(run_cli, "bert.py") == []


# titans-pytorch's shape: two training scripts side by side, the README runs one (`uv run train_mac.py`)
HAND_ACCUMULATION_SCRIPT = """
    import torch
    from accelerate import Accelerator
    from torch.optim import Adam

    GRAD_ACCUM_EVERY = 4


    def main(model, train_loader, num_batches):
        optim = Adam(model.parameters(), lr=1e-4)
        accelerator = Accelerator()
        model, optim, train_loader = accelerator.prepare(model, optim, train_loader)
        for i in range(num_batches):
            model.train()
            for _ in range(GRAD_ACCUM_EVERY):
                data = next(train_loader)
                loss = model(data, return_loss=True)
                accelerator.backward(loss / GRAD_ACCUM_EVERY)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optim.step()
            optim.zero_grad()
"""

SIBLING_TRAINING_SCRIPT = """
    def main(model, optim, train_loader, num_batches):
        for i in range(num_batches):
            for _ in range(4):
                loss = model(next(train_loader), return_loss=True)
                loss.backward()
            optim.step()
            optim.zero_grad()
"""

UV_README = ("Then modify `train_mac.py` and run it\n\n```bash\n$ uv run train_mac.py\n```\n\n"
             "@inproceedings{Behrouz2024TitansLT,\n    title = {Titans},\n}\n")


def test_a_sibling_training_script_launched_alone_is_how_the_scripts_run(project: Path, run_cli) -> None:
    # the README runs the other training script of the folder, one process; a BibTeX `@inproceedings`
    # is no `nproc`
    write_project(project, {"train_implicit_mlp_attn.py": HAND_ACCUMULATION_SCRIPT,
                            "train_mac.py": SIBLING_TRAINING_SCRIPT, "README.md": UV_README})
    assert _lc501(run_cli, "train_implicit_mlp_attn.py") == []


def test_a_documented_script_that_trains_nothing_says_nothing_of_the_launch(project: Path, run_cli) -> None:
    write_project(project, {"train_implicit_mlp_attn.py": HAND_ACCUMULATION_SCRIPT,
                            "train_mac.py": "import torch\n\ntorch.save(torch.arange(10), 'data.pt')\n",
                            "README.md": UV_README})
    assert len(_lc501(run_cli, "train_implicit_mlp_attn.py")) == 1


def test_a_sibling_that_stops_training_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"train_implicit_mlp_attn.py": HAND_ACCUMULATION_SCRIPT,
                            "train_mac.py": SIBLING_TRAINING_SCRIPT, "README.md": UV_README})
    assert _lc501(run_cli, "train_implicit_mlp_attn.py") == []
    (project / "train_mac.py").write_text("print('prepare the data')\n")
    assert len(_lc501(run_cli, "train_implicit_mlp_attn.py")) == 1


def test_no_documented_launch_of_any_script_keeps_the_finding(project: Path, run_cli) -> None:
    # simple-hierarchical-transformer's shape: the README shows the library, no command
    write_project(project, {"train.py": HAND_ACCUMULATION_SCRIPT, "README.md": "```python\nloss.backward()\n```\n"})
    assert len(_lc501(run_cli, "train.py")) == 1


LC502_FIXTURE = (Path(__file__).resolve().parents[1] / "rules" / "fixtures" / "LC502"
                 / "accelerate_no_sync_around_backward.py").read_text()


def _lc502(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC502", path)
    return [line for line in out.splitlines() if ": LC502" in line]


def test_accelerate_no_sync_misplaced_on_one_process_is_silent(project: Path, run_cli) -> None:
    # LC502 reads the same launches: on one process Accelerate wraps nothing, no sync is misplaced
    write_project(project, {"grpo.py": LC502_FIXTURE, "run.sh": "python grpo.py --model gpt2\n"})
    assert _lc502(run_cli, "grpo.py") == []


def test_accelerate_no_sync_misplaced_without_documented_launch_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"grpo.py": LC502_FIXTURE})
    assert len(_lc502(run_cli, "grpo.py")) == 1
