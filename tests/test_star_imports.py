"""A project's own functions taken with ``from module import *`` are read as if imported by name
(``loopcheck.project.star_imports``), and a copied ``clip_grad_norm_`` body (each gradient scaled in
place by ``max_norm / (total_norm + eps)``) is a clip (``loopcheck.project.facts``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from loopcheck.project.facts import extract
from tests.projects import write_project

CLIP_GRADS = """
    import torch


    def clip_grads_(parameters, max_norm, norm_type=2):
        parameters = [p for p in parameters if p.grad is not None]
        total_norm = torch.norm(torch.stack([torch.norm(p.grad.detach(), norm_type) for p in parameters]), norm_type)
        clip_coef = max_norm / (total_norm + 1e-6)
        if clip_coef < 1:
            for p in parameters:
                p.grad.detach().mul_(clip_coef)
        return total_norm
"""

CLIP_AFTER_STEP = """
    import torch
    from ops import *


    def train(model, loader, optimizer, max_norm):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            clip_grads_(model.parameters(), max_norm)
"""


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


def test_a_copied_norm_clip_is_a_clip() -> None:
    assert extract(textwrap.dedent(CLIP_GRADS), "ops.py").functions["clip_grads_"].clips
    halved = textwrap.dedent(CLIP_GRADS).replace("mul_(clip_coef)", "mul_(0.5)")
    assert not extract(halved, "ops.py").functions["clip_grads_"].clips  # a fixed factor is no clip
    weights = textwrap.dedent(CLIP_GRADS).replace("p.grad.detach().mul_", "p.data.mul_")
    assert not extract(weights, "ops.py").functions["clip_grads_"].clips  # the weights, not the gradients


def test_a_star_imported_clip_after_the_step(project: Path, run_cli) -> None:
    write_project(project, {"ops.py": CLIP_GRADS, "train.py": CLIP_AFTER_STEP})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:11:") and " LC107 " in found[0]
    before = textwrap.dedent(CLIP_AFTER_STEP).replace(
        "        optimizer.step()\n        clip_grads_(model.parameters(), max_norm)",
        "        clip_grads_(model.parameters(), max_norm)\n        optimizer.step()")
    assert before != textwrap.dedent(CLIP_AFTER_STEP)
    write_project(project, {"train.py": before})
    assert _codes(run_cli, "train.py") == []


def test_a_star_import_follows_the_modules_edits(project: Path, run_cli) -> None:
    write_project(project, {"ops.py": CLIP_GRADS, "train.py": CLIP_AFTER_STEP})
    assert len(_codes(run_cli, "train.py")) == 1
    write_project(project, {"ops.py": "def clip_grads_(parameters, max_norm):\n    return max_norm\n"})
    assert _codes(run_cli, "train.py") == []  # the cached result is not reused


def test_names_a_star_import_does_not_bind(project: Path, run_cli) -> None:
    private = textwrap.dedent(CLIP_GRADS).replace("clip_grads_", "_clip_grads")
    write_project(project, {"ops.py": private, "train.py": CLIP_AFTER_STEP.replace("clip_grads_", "_clip_grads")})
    assert _codes(run_cli, "train.py") == []  # a private name without `__all__`
    listed = "__all__ = ['other']\n" + textwrap.dedent(CLIP_GRADS)
    write_project(project, {"ops.py": listed, "train.py": CLIP_AFTER_STEP})
    assert _codes(run_cli, "train.py") == []  # a name its `__all__` leaves out
    own = CLIP_AFTER_STEP + "\n\n    def clip_grads_(parameters, max_norm):\n        return max_norm\n"
    write_project(project, {"ops.py": CLIP_GRADS, "train.py": own})
    assert _codes(run_cli, "train.py") == []  # the file's own definition


SCHEDULER_HELPER = """
    from transformers import get_linear_schedule_with_warmup


    def get_scheduler(optimizer, total_steps):
        return get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=total_steps)
"""

SCHEDULED = """
    import torch
    from utils import *


    def train(model, train_loader, config):
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
        scheduler = get_scheduler(optimizer, total_steps=HORIZON)
        for epoch in range(config.epochs):
            for i, (x, y) in enumerate(train_loader):
                loss = torch.nn.functional.cross_entropy(model(x), y) / config.accumulation
                loss.backward()
                if (i + 1) % config.accumulation == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
"""


def test_a_star_imported_scheduler_helper(project: Path, run_cli) -> None:
    write_project(project, {"utils.py": SCHEDULER_HELPER,
                            "train.py": SCHEDULED.replace("HORIZON", "config.epochs * len(train_loader)")})
    found = _codes(run_cli, "train.py")
    assert any(" LC303 " in line and "`get_scheduler`" in line for line in found), found
    write_project(project, {"train.py": SCHEDULED.replace(
        "HORIZON", "config.epochs * len(train_loader) // config.accumulation")})
    assert not any(" LC303 " in line for line in _codes(run_cli, "train.py"))


def test_star_imports_are_kept_in_the_cached_facts() -> None:
    import json

    from loopcheck.project.facts import ModuleFacts

    facts = extract(textwrap.dedent(CLIP_AFTER_STEP) + "from .pkg import *\n", "train.py", functions=False)
    assert facts.star_imports == (("ops", 0), ("pkg", 1))
    assert ModuleFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
