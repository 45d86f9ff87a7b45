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
