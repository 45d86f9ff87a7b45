"""Gradient clipping written by hand: an in-place clamp of each parameter's gradient
(`param.grad.data.clamp_(-c, c)`, the `clip_gradient(optimizer, c)` helper of the PraNet/Polyp-PVT
family) is clipping, in the file or in a helper of another module; after `scaler.scale(loss)` and
before `scaler.unscale_` it clips scaled gradients (LC201). An optimizer class of another module
whose own `step()` clips is still an optimizer step."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from loopcheck.engine import check_text
from loopcheck.project.facts import ModuleFacts, extract
from loopcheck.selection import resolve
from tests.projects import write_project

CLIP_GRADIENT = """
    def clip_gradient(optimizer, grad_clip):
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    param.grad.data.clamp_(-grad_clip, grad_clip)
"""

LOOP = """
    import torch
    HELPER

    def train(model, loader, optimizer, clip=0.5):
        scaler = torch.amp.GradScaler("cuda")
        for images, gts in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(images), gts)
            scaler.scale(loss).backward()
            UNSCALEclip_gradient(optimizer, clip)
            scaler.step(optimizer)
            scaler.update()
"""


def _loop(helper: str, unscale: bool) -> str:
    code = textwrap.dedent(LOOP).replace("HELPER", helper)
    return code.replace("UNSCALE", "scaler.unscale_(optimizer)\n        " if unscale else "")


def _found(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in check_text(source, "train.py", resolve())]


def test_a_clamp_of_the_gradients_in_a_helper_of_the_file_clips_scaled_gradients() -> None:
    helper = textwrap.dedent(CLIP_GRADIENT)
    source = _loop(helper, unscale=False)
    clamp = next(n for n, line in enumerate(source.splitlines(), 1) if "clamp_" in line)
    assert _found(source) == [(clamp, "LC201")]
    assert _found(_loop(helper, unscale=True)) == []


def test_a_clamp_of_something_else_is_no_clipping() -> None:
    helper = textwrap.dedent(CLIP_GRADIENT).replace("param.grad.data.clamp_", "param.data.clamp_")
    assert _found(_loop(helper, unscale=False)) == []  # weight clipping (WGAN) acts on the weights


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


def test_a_clip_helper_of_another_module_clips_at_its_call(project: Path, run_cli) -> None:
    facts = extract(textwrap.dedent(CLIP_GRADIENT), "utils.py")
    assert facts.functions["clip_gradient"].clips
    assert ModuleFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts  # as cached
    helper = "from utils import clip_gradient\n"
    write_project(project, {"utils.py": CLIP_GRADIENT, "train.py": _loop(helper, unscale=False)})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:13:") and " LC201 " in found[0]
    write_project(project, {"train.py": _loop(helper, unscale=True)})
    assert _codes(run_cli, "train.py") == []


def test_a_helper_that_unscales_before_it_clips_is_no_clipping_of_scaled_gradients(project: Path,
                                                                                  run_cli) -> None:
    unscaling = """
        import torch


        def clip_gradient(optimizer, grad_clip, scaler):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], grad_clip)
    """
    assert not extract(textwrap.dedent(unscaling), "utils.py").functions["clip_gradient"].clips
    loop = _loop("from utils import clip_gradient\n", unscale=False).replace(
        "clip_gradient(optimizer, clip)", "clip_gradient(optimizer, clip, scaler)")
    write_project(project, {"utils.py": unscaling, "train.py": loop})
    assert _codes(run_cli, "train.py") == []


def test_an_optimizer_whose_own_step_clips_still_steps(project: Path, run_cli) -> None:
    bert_adam = """
        import torch
        from torch.nn.utils import clip_grad_norm_


        class BertAdam(torch.optim.Optimizer):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is not None:
                            clip_grad_norm_(p, group["max_grad_norm"])
                            p.data.add_(p.grad, alpha=-group["lr"])
    """
    loop = """
        import torch
        from torch.utils.data import DataLoader
        from optimization import BertAdam


        def train(model, dataset, epochs, accum):
            optimizer = BertAdam(model.parameters(), lr=5e-5)
            train_dataloader = DataLoader(dataset, batch_size=32, shuffle=True)
            for epoch in range(epochs):
                for step, (x, y) in enumerate(train_dataloader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (step + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
    """
    write_project(project, {"optimization.py": bert_adam, "train.py": loop})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:14:") and " LC105 " in found[0]


ACCELERATE_TRAINER = """
    from accelerate import Accelerator


    class Trainer:
        def __init__(self, model, optimizer, loader, cfg):
            self.accelerator = Accelerator(gradient_accumulation_steps=cfg.gradient_accumulation_steps)
            self.dit, self.optimizer, self.loader = self.accelerator.prepare(model, optimizer, loader)
            self.cfg = cfg

        def clip_gradients(self):
            GUARDself.accelerator.clip_grad_norm_(self.dit.parameters(), self.cfg.max_grad_norm)

        def fit(self):
            for batch in self.loader:
                with self.accelerator.accumulate(self.dit):
                    self.accelerator.backward(self.dit(batch).mean())
                    self.clip_gradients()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""


def test_a_method_of_the_file_named_like_a_clip_function_is_read_through() -> None:
    # `self.clip_gradients()` is the trainer's own helper, not Lightning's: what its body does decides
    guarded = ACCELERATE_TRAINER.replace("GUARD", "if self.accelerator.sync_gradients:\n                ")
    unguarded = ACCELERATE_TRAINER.replace("GUARD", "")
    assert [f.line for f in check_text(textwrap.dedent(guarded), "train.py", resolve()) if f.code == "LC107"] == []
    assert [f.line for f in check_text(textwrap.dedent(unguarded), "train.py", resolve()) if f.code == "LC107"] == [12]
