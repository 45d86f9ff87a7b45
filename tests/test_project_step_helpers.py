"""A batch loop whose backward and step run in a function of another project module, called with the
optimizer (`engine.step(step=i, model=model, optimizer=optimizer, loss=loss)`), in a file that never
says `backward(` itself: the project's facts make it a training loop, and its findings point at the
call, naming the helper's file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

ENGINE = """
    from torch import nn


    def step(step, model, optimizer, loss, max_norm, grad_accum_steps=1):
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
        optimizer.step()
        ZERO
"""
TRAIN = """
    import torch
    from torch import nn

    IMPORT


    def train_one_epoch(model, optimizer, criterion, loader, max_norm):
        model.train()
        for batch_idx, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            CALL(step=batch_idx, model=model, optimizer=optimizer, loss=loss, max_norm=max_norm)
"""


def _found(run_cli, path: str = ".") -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--no-cache", path)
    return [line for line in out.splitlines() if " LC" in line]


@pytest.mark.parametrize(("imported", "call"), [
    ("from src import engine", "engine.step"),
    ("from src.engine import step", "step"),
])
def test_a_step_helper_of_another_module_that_never_zeroes(project: Path, run_cli, imported: str,
                                                           call: str) -> None:
    write_project(project, {"src/__init__.py": "", "src/engine.py": ENGINE.replace("ZERO", "pass"),
                            "src/exp/__init__.py": "",
                            "src/exp/train.py": TRAIN.replace("IMPORT", imported).replace("CALL", call)})
    found = _found(run_cli)
    assert len(found) == 1 and found[0].startswith("src/exp/train.py:12:") and " LC103 " in found[0]
    assert "src/engine.py:5)" in found[0]  # where the helper is defined
    assert _found(run_cli, "src/exp/train.py") == found  # only the changed file, as pre-commit passes it


def test_a_step_helper_of_another_module_that_zeroes_after_the_step(project: Path, run_cli) -> None:
    write_project(project, {"src/__init__.py": "",
                            "src/engine.py": ENGINE.replace("ZERO", "optimizer.zero_grad()"),
                            "src/exp/__init__.py": "",
                            "src/exp/train.py": TRAIN.replace("IMPORT", "from src import engine")
                                                       .replace("CALL", "engine.step")})
    assert _found(run_cli) == []


def test_an_engine_stepped_in_another_module_clears_its_own_gradients(project: Path, run_cli) -> None:
    """gpt-neox's `train_step(model=model, optimizer=optimizer, ...)`: the helper back-propagates through
    the DeepSpeed engine it is handed (`model.backward(loss)`) and steps it (`model.step()`), which
    zeroes the gradients itself: not an optimizer left uncleared."""
    engine = """
        def backward_step(optimizer, model, loss):
            model.backward(loss)


        def train_step(data_iterator, model, optimizer):
            loss = model(next(data_iterator))
            backward_step(optimizer=optimizer, model=model, loss=loss)
            model.step()
            return loss
    """
    loop = """
        from training import train_step


        def coord_check(models, dataloader, optimizer_class, steps):
            for width, model in models.items():
                optimizer = optimizer_class(model)
                for step in range(steps):
                    train_step(data_iterator=dataloader, model=model, optimizer=optimizer)
    """
    write_project(project, {"training.py": engine, "mup_substitute.py": loop})
    assert _found(run_cli) == []


@pytest.mark.parametrize(("update", "found"), [
    # DMD distillation's critic update: its own loss, clip and optimizer (an attribute of what it is
    # handed), called right after the student's step: its clip is its own update's, before its own step
    ("    fake_loss.backward()\n    nn.utils.clip_grad_norm_(ctx.fake.parameters(), 1.0)\n    ctx.fake_opt.step()\n", 0),
    # a helper that only clips, called after the step, clips what the step already used
    ("    nn.utils.clip_grad_norm_(ctx.fake.parameters(), 1.0)\n", 1),
])
def test_a_whole_update_of_another_module_after_the_step(project: Path, run_cli, update: str, found: int) -> None:
    steps = ("    from torch import nn\n\n\n    def fake_update(ctx, x_pred):\n"
             "        fake_loss = ctx.fake(x_pred.detach()).mean()\n"
             + "".join("    " + line + "\n" for line in update.splitlines()))
    loop = """
        import torch

        from steps import fake_update


        def distill(ctx, student, student_opt, loader):
            for batch in loader:
                x_pred = student(batch)
                loss_student = x_pred.mean()
                loss_student.backward()
                torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
                student_opt.step()
                student_opt.zero_grad(set_to_none=True)
                fake_update(ctx, x_pred)
    """
    write_project(project, {"steps.py": steps, "distill.py": loop})
    assert len([line for line in _found(run_cli) if " LC107 " in line]) == found
