"""Training scripts written for torch < 0.4 name a keyword argument ``async`` (``cuda(async=True)``),
which Python >= 3.7 refuses: the syntax error is reported, and the rest of the file is still checked."""

from __future__ import annotations

import textwrap

from loopcheck.async_keyword import read_as_name
from loopcheck.engine import check_text
from loopcheck.fixer import fix_text
from loopcheck.selection import resolve

PRE_04 = textwrap.dedent("""\
    import torch
    from torch.nn.utils import clip_grad_norm


    def train(train_loader, model, criterion, optimizer, args):
        model.train()
        for i, (input, target) in enumerate(train_loader):
            target = target.cuda(async=True)
            input = input.to('cuda', async = True)
            loss = criterion(model(input), target) / args.iter_size
            loss.backward()
            if args.clip_gradient is not None:
                clip_grad_norm(model.parameters(), args.clip_gradient)
            if (i + 1) % args.iter_size == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)


def _found(source: str) -> list[tuple[int, int, str]]:
    return [(f.line, f.col, f.code) for f in check_text(source, "train.py", resolve())]


def test_the_rest_of_a_pre_04_script_is_checked() -> None:
    findings = check_text(PRE_04, "train.py", resolve())
    assert [(f.line, f.col, f.code) for f in findings] == [(8, 30, "LC000"), (13, 13, "LC107"), (14, 12, "LC105")]
    syntax = findings[0]
    assert "Python 3.7" in syntax.message and syntax.severity == "error"
    # the lines shown are the file's own, not the reading's
    assert all("Async" not in f.source_line for f in findings)
    assert findings[0].source_line == "        target = target.cuda(async=True)"


def test_the_findings_are_those_of_the_script_with_non_blocking_less_the_syntax_error() -> None:
    today = PRE_04.replace("async=True", "non_blocking=True").replace("async = True", "non_blocking = True")
    assert [(line, code) for line, _, code in _found(PRE_04)][1:] == [(line, code) for line, _, code in _found(today)]


def test_nothing_is_fixed_in_a_file_checked_through_a_reading() -> None:
    fixed = fix_text(PRE_04, "train.py", resolve(), unsafe=True)
    assert fixed.source == PRE_04 and fixed.applied == 0
    assert all(not f.fixable for f in fixed.findings)


def test_another_syntax_error_leaves_the_file_unchecked() -> None:
    python2 = PRE_04.replace("model.train()", "print 'training'")
    assert _found(python2) == [(6, 5, "LC000")]
    assert "Python 3.7" not in check_text(python2, "train.py", resolve())[0].message


def test_only_an_assigned_async_is_read_as_a_name() -> None:
    assert read_as_name("x.cuda(async=True)\ndef f(self, async=False): pass\n") == \
        "x.cuda(Async=True)\ndef f(self, Async=False): pass\n"
    assert read_as_name("async def f():\n    async with a: pass\n") is None
    assert read_as_name("ok = async == 1\n") is None


def test_a_file_that_parses_is_checked_as_it_is() -> None:
    valid = PRE_04.replace("async=True", "non_blocking=True").replace("async = True", "non_blocking = True")
    valid += "\nasync def serve(queue):\n    async for batch in queue:\n        print(batch)\n"
    assert all("Python 3.7" not in f.message for f in check_text(valid, "train.py", resolve()))


def test_a_pre_04_script_steps_its_scheduler_first_as_torch_then_did() -> None:
    # before torch 1.1 the scheduler was stepped at the top of the epoch: LC302 is torch >= 1.1's order
    epochs = textwrap.dedent("""\
        import torch


        def main(model, loader, optimizer, epochs):
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
            for epoch in range(epochs):
                scheduler.step()
                for input, target in loader:
                    target = target.cuda(async=True)
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(input), target).backward()
                    optimizer.step()
        """)
    assert [code for _, _, code in _found(epochs)] == ["LC000"]
    today = epochs.replace("async=True", "non_blocking=True")
    assert [code for _, _, code in _found(today)] == ["LC302"]
