"""`accelerator.backward(loss)` divides by `Accelerator(gradient_accumulation_steps=N)` whether or not
the loop enters `accumulate()` (Accelerate 1.15: `loss = loss / self.gradient_accumulation_steps`
before every backward but DeepSpeed's). A loop accumulating by hand around it with no such setting
back-propagates N undivided losses: LC102 where that changes the step (an SGD step, a clip
threshold), not where it cannot (AdamW with decoupled decay and no clip: run on CPU, the parameters
after two windows differ by 3e-8). The shape is a retention model's `python bert.py` loop."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
    import torch
    import torch.nn.functional as F
    from accelerate import Accelerator
    from transformers import AdamW


    def train(args, model, train_dataloader):
        groups = [{{"params": model.encoder.parameters(), "weight_decay": args.weight_decay}},
                  {{"params": model.head.parameters(), "weight_decay": 0.0}}]
        optimizer = {optimizer}
        accelerator = Accelerator({setting})
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for step, batch in enumerate(train_dataloader):
            loss = F.cross_entropy(model(**batch)["logits"], batch["labels"])
            accelerator.backward(loss)
            {clip}
            if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                optimizer.zero_grad()
"""


def _lc102(optimizer: str, setting: str = "", clip: str = "pass") -> list[str]:
    code = textwrap.dedent(LOOP.format(optimizer=optimizer, setting=setting, clip=clip))
    return [f.message for f in check_text(code, "bert.py", resolve(select=["LC102"]))]


def test_sgd_without_an_accumulation_setting_is_flagged() -> None:
    found = _lc102("torch.optim.SGD(groups, lr=args.lr)")
    assert len(found) == 1 and "times too large" in found[0]


def test_adamw_with_a_clip_is_not_flagged() -> None:
    # the clip meets the N-fold sum, as if set N times lower: another clip setting, not a wrong step
    assert _lc102("AdamW(groups, lr=args.lr, eps=args.adam_epsilon)",
                  clip="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)") == []


def test_adam_with_a_coupled_decay_is_flagged() -> None:
    found = _lc102("torch.optim.Adam(groups, lr=args.lr)")
    assert len(found) == 1 and "weight_decay" in found[0]


def test_adamw_without_a_clip_is_not_flagged() -> None:
    assert _lc102("AdamW(groups, lr=args.lr, eps=args.adam_epsilon)") == []


def test_the_accelerator_divides_by_its_setting_outside_accumulate() -> None:
    assert _lc102("torch.optim.SGD(groups, lr=args.lr)",
                  setting="gradient_accumulation_steps=args.gradient_accumulation_steps") == []
