"""An undivided loss whose optimizer no file of the project constructs (argus's ``self.optimizer``,
built by the framework from ``'optimizer': ('AdamW', {...})`` in the entry script's parameters) is
not reported where every optimizer class the project's Python files name in a string is an Adam-like
one with decoupled decay, and nothing clips: the N-fold sum leaves the step unchanged (LC102). Another
class named anywhere, a clip, or no name at all keeps the finding; a changed name invalidates the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

MODEL = """
    import argus


    class Model(argus.Model):
        def train_step(self, batch, state):
            self.train()
            self.optimizer.zero_grad()
            for chunk in deep_chunk(batch, self.iter_size):
                input, target = self.prepare_batch(chunk, self.device)
                loss = self.loss(self.nn_module(input), target)
                loss.backward()
            self.optimizer.step()
            return loss.item()
"""

TRAIN = """
    from src.models import Model

    PARAMS = {
        'nn_module': ('timm', {'model_name': 'efficientnet_b0'}),
        'loss': 'CrossEntropyLoss',
        'optimizer': ('OPTIMIZER', {'lr': 3e-4}),
        'iter_size': 2,
    }
    model = Model(PARAMS)
"""


def _undivided(project: Path, run_cli, optimizer: str, model: str = MODEL) -> list[str]:
    write_project(project, {"src/__init__.py": "", "src/models.py": model,
                            "train.py": TRAIN.replace("OPTIMIZER", optimizer)})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "src/models.py")
    return [line for line in out.splitlines() if ": LC102" in line]


def test_an_adamw_the_project_names_leaves_the_sum_harmless(project: Path, run_cli) -> None:
    assert _undivided(project, run_cli, "AdamW") == []


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])  # SGD scales with it; Adam's decay may be coupled
def test_another_optimizer_named_keeps_the_finding(project: Path, run_cli, optimizer: str) -> None:
    assert len(_undivided(project, run_cli, optimizer)) == 1


def test_a_clip_keeps_the_finding(project: Path, run_cli) -> None:
    clipped = MODEL.replace("            self.optimizer.step()\n",
                            "            torch.nn.utils.clip_grad_norm_(self.nn_module.parameters(), 1.0)\n"
                            "            self.optimizer.step()\n")
    assert clipped != MODEL
    assert len(_undivided(project, run_cli, "AdamW", clipped)) == 1


def test_a_changed_name_invalidates_the_cached_result(project: Path, run_cli) -> None:
    assert _undivided(project, run_cli, "AdamW") == []
    (project / "train.py").write_text(TRAIN.replace("OPTIMIZER", "SGD").replace("\n    ", "\n").lstrip())
    _, out, _ = run_cli("check", "-q", "--no-show-source", "src/models.py")
    assert len([line for line in out.splitlines() if ": LC102" in line]) == 1
