"""A loop-top ``if state["stop"]: break`` whose flag the pass sets only right before it leaves the
loop itself (a max-steps stop: ``state["stop"] = True; break``) cannot end a pass part-way: the
flag does not change within a pass. The pass still ends on the loader's last batch, and its partial
window is LC105's (minimind's trainers, copied by cklxx/mini-llm). A flag set where the pass goes on
(a time budget read at the next batch) can end it part-way, and keeps LC105 silent."""

from __future__ import annotations

from loopcheck.engine import check_source

LOOP = """
import torch

state = {"stop": False, "global_step": 0, "max_steps": args.max_steps}


def train_epoch(epoch):
    if state["stop"]:
        return
    for step, (x, y) in enumerate(train_loader):
        if state["stop"]:
            break
        loss = torch.nn.functional.cross_entropy(model(x), y) / args.accumulation_steps
        loss.backward()
        if (step + 1) % args.accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        state["global_step"] += 1
        if state["max_steps"] is not None and state["global_step"] >= state["max_steps"]:
            print("reached max_steps, stopping")
            state["stop"] = True
            break


for epoch in range(args.epochs):
    train_epoch(epoch)
"""


def _partial(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC105"])]


def test_a_flag_set_only_before_the_pass_breaks_does_not_end_a_pass_part_way() -> None:
    assert _partial(LOOP) == [15]
    reset = LOOP.replace("for epoch in range(args.epochs):", 'state["stop"] = False\nfor epoch in range(args.epochs):')
    assert reset != LOOP
    assert _partial(reset) == [15]  # cleared before the run: it cannot stop a pass either


def test_a_flag_set_where_the_pass_goes_on_may_end_it_part_way() -> None:
    later = LOOP.replace('            state["stop"] = True\n            break\n', '            state["stop"] = True\n')
    assert later != LOOP
    assert _partial(later) == []


def test_a_flag_a_helper_is_handed_may_be_set_there() -> None:
    handed = LOOP.replace("        loss.backward()\n", "        loss.backward()\n        check_budget(state)\n")
    assert handed != LOOP
    assert _partial(handed) == []


def test_a_flag_another_function_of_the_file_sets_may_be_set_mid_pass() -> None:
    helper = LOOP.replace("        loss.backward()\n", "        loss.backward()\n        check_budget()\n") + (
        '\n\ndef check_budget():\n    if time.time() > deadline:\n        state["stop"] = True\n')
    assert _partial(helper) == []
