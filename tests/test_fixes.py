"""The autofix guarantees, over every invalid example of every fixable rule.

A fixed file parses, no longer reports what was fixed, is unchanged by a second ``--fix``, and
keeps every line the fix did not touch byte for byte and in order.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from loopcheck.catalog import CODES
from loopcheck.engine import _rules, analyse, check_source
from loopcheck.fixer import fix_text
from loopcheck.fixes import insert_before
from loopcheck.model import Kind
from loopcheck.rules import RULES, Rule
from loopcheck.selection import resolve

FIXABLE = [(code, i, textwrap.dedent(example)) for code, rule in RULES.items() if rule.fixable
           for i, example in enumerate(rule.INVALID)]


def _untouched_lines_kept(before: str, after: str, touched: set[int]) -> bool:
    """Every line outside ``touched`` appears in ``after`` unchanged and in the same order."""
    remaining = iter(after.splitlines())
    return all(any(line == candidate for candidate in remaining)
               for n, line in enumerate(before.splitlines(), 1) if n not in touched)


@pytest.mark.parametrize(("code", "index", "example"), FIXABLE, ids=[f"{c}-{i}" for c, i, _ in FIXABLE])
def test_fix_guarantees(code: str, index: int, example: str) -> None:
    codes = frozenset({code})
    module, results = analyse(example, "example.py", codes)
    fixable = [f for f, fix in results if fix is not None]
    result = fix_text(example, "example.py", codes, unsafe=True)
    fixed = result.source
    assert result.applied == len(fixable), result.not_applied
    cst.parse_module(fixed)
    _, after = analyse(fixed, "example.py", codes)
    assert len(after) <= len(results) - len(fixable)
    assert all(fix is None for _, fix in after)
    again = fix_text(fixed, "example.py", codes, unsafe=True)
    assert (again.source, again.applied) == (fixed, 0)
    touched = {n for f in fixable for n in range(f.line, f.end_line + 1)}
    # and what each fix edits beyond its finding (LC105 extends every copy of the step condition)
    assert module is not None
    where = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.PositionProvider)
    touched |= {n for _, fix in results if fix is not None for e in fix.edits
                for n in range(where[e.target].start.line, where[e.target].end.line + 1)}
    # LC206's import-form fix also rewrites the import the calls come from
    touched |= {n for n, line in enumerate(example.splitlines(), 1) if line.startswith("from torch.cuda.amp")}
    assert _untouched_lines_kept(example, fixed, touched), fixed


def test_every_fixable_rule_fixes_at_least_one_example() -> None:
    for code, rule in RULES.items():
        if rule.fixable:
            assert any(fix for example in rule.INVALID
                       for _, fix in analyse(textwrap.dedent(example), "x.py", frozenset({code}))[1]), code


def test_zero_grad_moves_after_the_step_keeping_comments() -> None:
    source = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            # fresh gradients for this batch
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum  # mean over the window
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """)
    result = fix_text(source, "t.py", frozenset({"LC101"}))
    fixed = result.source
    assert result.applied == 1
    assert fixed == textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum  # mean over the window
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                # fresh gradients for this batch
                optimizer.zero_grad()
    """)


def test_partial_window_condition_is_extended() -> None:
    source = textwrap.dedent("""\
        for epoch in range(epochs):
            for step, batch in enumerate(tqdm(train_loader)):
                loss = model(**batch).loss / accum
                loss.backward()
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    fixed = fix_text(source, "t.py", frozenset({"LC105"})).source
    assert "        if (step + 1) % accum == 0 or (step + 1) == len(train_loader):\n" in fixed



def test_partial_window_condition_over_several_lines_is_extended_in_brackets() -> None:
    source = textwrap.dedent("""\
        def train_one_epoch(model, data_loader, optimizer, loss_scaler, accum_iter):
            optimizer.zero_grad()
            for data_iter_step, (samples, targets) in enumerate(data_loader):
                loss = model(samples, targets) / accum_iter
                loss_scaler(loss, optimizer, parameters=model.parameters(),
                            update_grad=(data_iter_step + 1)
                            % accum_iter == 0)
                if (data_iter_step + 1) % accum_iter == 0:
                    optimizer.zero_grad()

        for epoch in range(epochs):
            train_one_epoch(model, data_loader, optimizer, loss_scaler, 4)
    """)
    assert [f.code for f in check_source(source, select=["LC105"])] == ["LC105"]
    fixed = fix_text(source, "t.py", frozenset({"LC105"})).source
    assert ("update_grad=((data_iter_step + 1)\n"
            "                    % accum_iter == 0 or (data_iter_step + 1) == len(data_loader)))") in fixed
    assert "        if (data_iter_step + 1) % accum_iter == 0 or (data_iter_step + 1) == len(data_loader):\n" in fixed


def test_unscale_moves_before_the_clipping_of_the_step_branch() -> None:
    source = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            scaler.scale(criterion(model(x), y) / accum).backward()
            scaler.unscale_(optimizer)
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """)
    result = fix_text(source, "t.py", frozenset({"LC204"}))
    fixed = result.source
    assert result.applied == 1
    assert fixed.splitlines()[2:5] == ["    if (i + 1) % accum == 0:", "        scaler.unscale_(optimizer)",
                                       "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"]
    assert analyse(fixed, "t.py", frozenset({"LC201", "LC204"}))[1] == []


def test_identical_findings_are_all_fixed_in_one_run() -> None:
    loop = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """)
    result = fix_text(loop + loop, "t.py", frozenset({"LC101"}))
    assert result.applied == 2
    again = fix_text(result.source, "t.py", frozenset({"LC101"}))
    assert (again.source, again.applied) == (result.source, 0)


def test_unsafe_fixes_need_the_flag() -> None:
    source = textwrap.dedent("""\
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(epochs):
            for x, y in train_loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            model.eval()
            evaluate(model, val_loader)
    """)
    codes = frozenset({"LC605"})
    [(finding, fix)] = analyse(source, "t.py", codes)[1]
    assert fix is not None and not fix.safe and not finding.fix_safe
    assert fix_text(source, "t.py", codes).applied == 0
    result = fix_text(source, "t.py", codes, unsafe=True)
    assert result.applied == 1 and result.source.splitlines()[2] == "    model.train()"


# -- Right on every path: each shape below broke (or changed) real code before --------------------

ALL = resolve()


def _fix(source: str, codes: frozenset[str] = ALL, unsafe: bool = False) -> str:
    result = fix_text(textwrap.dedent(source), "t.py", codes, unsafe=unsafe)
    compile(result.source, "t.py", "exec")
    return result.source


def test_clip_before_unscale_moves_the_existing_unscale() -> None:
    # inserting a second unscale_ crashed: "unscale_() has already been called on this optimizer"
    fixed = _fix("""\
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
    """, frozenset({"LC201"}))
    assert fixed.count("unscale_") == 1
    assert ("    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n") in fixed


def test_zeroing_is_dropped_when_the_step_branch_already_zeroes() -> None:
    fixed = _fix("""\
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """, frozenset({"LC101"}))
    assert fixed.count("zero_grad") == 1
    assert fixed.index("optimizer.step()") < fixed.index("optimizer.zero_grad()")


def test_per_micro_batch_clip_is_dropped_when_the_step_branch_already_clips() -> None:
    fixed = _fix("""\
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
    """, frozenset({"LC107"}))
    assert fixed.count("clip_grad_norm_") == 1
    assert "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()" in fixed


def test_loss_is_divided_at_the_backward_so_logged_values_keep_their_scale() -> None:
    fixed = _fix("""\
        total = 0.0
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            total += loss.item()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """, frozenset({"LC102"}))
    assert "    (loss / accum).backward()\n    total += loss.item()\n" in fixed
    assert "loss = loss /" not in fixed


def test_loss_through_a_scaler_is_divided_inside_the_scale_call() -> None:
    fixed = _fix("""\
        for step in range(max_steps):
            for micro in range(grad_accum):
                outputs = model(**next(batches))
                scaler.scale(outputs.loss).backward()
                log(outputs.loss.item())
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    """, frozenset({"LC102"}))
    assert "scaler.scale(outputs.loss / grad_accum).backward()" in fixed
    assert "log(outputs.loss.item())" in fixed


def test_unscale_is_guarded_where_the_scaler_may_be_none() -> None:
    # `scaler.unscale_` unguarded raised AttributeError on every fp32 run
    fixed = _fix("""\
        scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
    """, frozenset({"LC201"}))
    assert ("    if scaler is not None:\n        scaler.unscale_(optimizer)\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n") in fixed


def test_unscale_is_guarded_by_the_test_of_the_branch_that_scales() -> None:
    # FunASR: an enabled scaler may exist while use_fp16 is off; unscaling unscaled gradients
    # would divide them by the loss scale
    fixed = _fix("""\
        for batch_idx, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_grad
            if use_fp16 and scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (batch_idx + 1) % accum_grad == 0:
                if grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
                if use_fp16 and scaler is not None:
                    scaler.step(optim)
                    scaler.update()
                else:
                    optim.step()
                optim.zero_grad()
    """, frozenset({"LC201"}))
    assert ("        if grad_clip > 0:\n            if use_fp16 and scaler is not None:\n"
            "                scaler.unscale_(optim)\n            torch.nn.utils.clip_grad_norm_") in fixed


def test_unscale_after_a_scaled_loss_assignment() -> None:
    fixed = _fix("""\
        for x, y in loader:
            loss = scaler.scale(criterion(model(x), y))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    """, frozenset({"LC201"}))
    assert "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_" in fixed


def test_unscale_inside_a_scaler_branch_needs_no_guard() -> None:
    fixed = _fix("""\
        scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
    """, frozenset({"LC201"}))
    assert "        scaler.unscale_(optimizer)\n        torch.nn.utils.clip_grad_norm_" in fixed


def test_zeroing_moves_after_every_step_branch() -> None:
    # moved into the scaler branch only, the fp32 branch never zeroed
    fixed = _fix("""\
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (i + 1) % accum == 0:
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
    """, frozenset({"LC101"}))
    assert fixed.endswith("    if (i + 1) % accum == 0:\n        if scaler is not None:\n"
                          "            scaler.step(optimizer)\n            scaler.update()\n        else:\n"
                          "            optimizer.step()\n        optimizer.zero_grad()\n")


def test_zeroing_moves_after_the_last_of_several_steps() -> None:
    # between two steps it zeroed the second optimizer's gradients before its step (LC104)
    source = """\
        for i, (x, y) in enumerate(loader):
            model.zero_grad()
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                opt_g.step()
                opt_d.step()
    """
    fixed = _fix(source, frozenset({"LC101"}))
    assert fixed.endswith("        opt_g.step()\n        opt_d.step()\n        model.zero_grad()\n")
    assert not [f for f in check_source(fixed) if f.code == "LC104"]


@pytest.mark.parametrize("test, extended", [
    ("(i + 1) % accum != 0", "(i + 1) % accum != 0 and (i + 1) != len(loader)"),
    ("(i + 1) % accum", "(i + 1) % accum and (i + 1) != len(loader)"),
])
def test_a_negated_step_condition_is_narrowed_not_widened(test: str, extended: str) -> None:
    # `test or last` inverted it: the skip branch also ran on the last batch
    fixed = _fix(f"""\
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if {test}:
                    continue
                optimizer.step()
                optimizer.zero_grad()
    """, frozenset({"LC105"}))
    assert f"        if {extended}:\n            continue\n" in fixed


def test_the_no_sync_branch_of_a_ddp_loop_is_narrowed() -> None:
    fixed = _fix("""\
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                if (i + 1) % accum != 0:
                    with model.no_sync():
                        (criterion(model(x), y) / accum).backward()
                else:
                    (criterion(model(x), y) / accum).backward()
                    optimizer.step()
                    optimizer.zero_grad()
    """, frozenset({"LC105"}))
    assert "        if (i + 1) % accum != 0 and (i + 1) != len(loader):\n" in fixed


def test_every_copy_of_the_step_condition_is_extended() -> None:
    # extending update_grad= alone left the zeroing and the scheduler on the old windows
    fixed = _fix("""\
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss_scaler(loss, optimizer, parameters=model.parameters(), update_grad=(i + 1) % accum == 0)
                if (i + 1) % accum == 0:
                    optimizer.zero_grad()
                    lr_scheduler.step_update(epoch * num_steps + i)
    """, frozenset({"LC105"}))
    assert fixed.count("(i + 1) % accum == 0 or (i + 1) == len(loader)") == 2, fixed


def test_a_finding_on_the_statement_the_fix_rewrites_is_not_new() -> None:
    # LC501 points at the loss-scaler call whose `update_grad=` the LC105 fix extends
    source = textwrap.dedent("""\
        model = torch.nn.parallel.DistributedDataParallel(model)
        for epoch in range(epochs):
            optimizer.zero_grad()
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss_scaler(loss, optimizer, parameters=model.parameters(), update_grad=(i + 1) % accum == 0)
                if (i + 1) % accum == 0:
                    optimizer.zero_grad()
    """)
    assert [f.code for f in check_source(source)] == ["LC501", "LC105"]
    result = fix_text(source, "t.py", frozenset({"LC105"}))
    assert result.applied == 1 and not result.not_applied
    assert "update_grad=(i + 1) % accum == 0 or (i + 1) == len(loader))" in result.source
    assert [f.code for f in check_source(result.source)] == ["LC501"]


class _Stubborn(Rule):
    """A rule whose fix inserts ``insert`` before each backward. With ``pass`` its finding stays
    (as LC605's once did, adding another ``model.train()`` on every run); a statement marked
    ``# fixed`` makes it go away."""

    code = "LC999"
    message = "test rule"
    fixable = True
    insert = "pass"

    def check(self, model):
        if "# fixed" not in model.source:
            for backward in model.events(Kind.BACKWARD):
                yield self.at(backward, fix=insert_before(backward.stmt, self.insert, "add a statement"))


@pytest.fixture
def stubborn(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(RULES, "LC999", _Stubborn)
    monkeypatch.setitem(CODES, "LC999", dataclasses.replace(CODES["LC101"], code="LC999", name="test-rule"))
    yield _Stubborn
    _rules.cache_clear()


LOOP = textwrap.dedent("""\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
""")


def test_a_fix_that_leaves_its_finding_is_rolled_back_and_reported(stubborn) -> None:
    result = fix_text(LOOP, "t.py", frozenset({"LC999"}))
    assert (result.source, result.applied) == (LOOP, 0)
    [left] = result.not_applied
    assert left.finding.code == "LC999" and left.reason == "the finding is still reported after the fix"
    assert left.describe().startswith("t.py:3:5: LC999 fix not applied: ")


def test_a_fix_that_adds_another_finding_is_rolled_back(stubborn, monkeypatch: pytest.MonkeyPatch) -> None:
    # the re-check runs every rule, not only the selected ones: here LC101 would appear
    monkeypatch.setattr(stubborn, "insert", "optimizer.zero_grad()  # fixed")
    result = fix_text(LOOP, "t.py", frozenset({"LC999"}))
    assert result.source == LOOP
    assert [n.reason for n in result.not_applied] == [
        "it would introduce LC101 (zero-grad-in-accumulation) at line 3"]


def test_a_fix_that_adds_nothing_is_applied(stubborn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stubborn, "insert", "x = 1  # fixed")
    result = fix_text(LOOP, "t.py", frozenset({"LC999"}))
    assert result.applied == 1 and "    x = 1  # fixed\n    loss.backward()" in result.source


def test_deprecated_amp_import_form_is_rewritten_with_every_call() -> None:
    fixed = _fix("""\
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler(enabled=use_amp)
        for x, y in loader:
            with autocast(dtype=torch.float16):
                loss = model(x)
    """, frozenset({"LC206"}))
    assert fixed == textwrap.dedent("""\
        from torch.amp import GradScaler, autocast

        scaler = GradScaler("cuda", enabled=use_amp)
        for x, y in loader:
            with autocast("cuda", dtype=torch.float16):
                loss = model(x)
    """)


def test_deprecated_amp_import_keeps_names_torch_amp_lacks() -> None:
    fixed = _fix("""\
        from torch.cuda.amp import custom_fwd, GradScaler as Scaler
        scaler = Scaler(2.0 ** 10)
    """, frozenset({"LC206"}))
    assert fixed == 'from torch.cuda.amp import custom_fwd\nfrom torch.amp import GradScaler as Scaler\n' \
                    'scaler = Scaler("cuda", 2.0 ** 10)\n'


@pytest.mark.parametrize("use", [
    "with autocast(True):\n    pass\n",  # positional: (enabled, dtype) became (device, dtype, enabled)
    "amp_autocast = functools.partial(autocast, dtype=torch.float16)\n",  # passed on, not called
])
def test_deprecated_amp_import_is_left_when_a_use_cannot_follow(use: str) -> None:
    source = "from torch.cuda.amp import autocast\n" + use
    assert _fix(source, frozenset({"LC206"})) == source


HELPER = """\
    def train_step(i, x, y):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()


    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            train_step(i, x, y)
"""


def test_an_event_of_a_helper_moves_inside_the_helper() -> None:
    fixed = _fix(HELPER, frozenset({"LC101"}))
    assert fixed.startswith("def train_step(i, x, y):\n    loss = criterion(model(x), y) / accum\n")
    assert "        optimizer.step()\n        optimizer.zero_grad()\n" in fixed


def test_a_helper_called_from_two_places_is_left_alone() -> None:
    # the move would also change what the other call does
    source = textwrap.dedent(HELPER) + "for x, y in val_loader:\n    train_step(0, x, y)\n"
    assert _fix(source, frozenset({"LC101"})) == source


def test_the_loss_of_a_helper_is_divided_by_the_parameter_bound_to_n() -> None:
    fixed = _fix("""\
        def train_step(batch, accum):
            loss = criterion(model(batch[0]), batch[1])
            loss.backward()
            return loss.item()


        def main(accum_steps):
            for i, batch in enumerate(loader):
                train_step(batch, accum_steps)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """, frozenset({"LC102"}))
    assert "    (loss / accum).backward()\n    return loss.item()\n" in fixed


def test_the_last_batch_step_is_unsafe_where_the_loop_can_end_the_pass_early() -> None:
    # with the batch cap turned on the pass ends before the last batch: `or i + 1 == len(loader)` does not
    # step that tail (run on CPU: 3 micro-batches left unstepped with the cap at 3, with or without the fix)
    source = (Path(__file__).parent.parent / "rules" / "fixtures" / "LC105"
              / "option_batch_cap_off_by_default_drops_tail.py").read_text()
    (capped,) = check_source(source, select=["LC105"])
    assert capped.fix_message is not None and capped.fix_safe is False
    uncapped = source.replace("            if args.minibatch_num_train > 0 and data_idx >= args.minibatch_num_train - 1:\n"
                              "                break\n", "")
    assert uncapped != source
    (whole,) = check_source(uncapped, select=["LC105"])
    assert whole.fix_message is not None and whole.fix_safe is True


def test_the_last_batch_step_is_unsafe_where_a_scheduler_steps_with_the_optimizer() -> None:
    # the schedule counts whole windows (`len(loader) // N * epochs`): the extra step of each pass runs it
    # past its horizon, where a cosine schedule climbs again
    source = textwrap.dedent("""\
        for epoch in range(epochs):
            optimizer.zero_grad()
            for step, batch in enumerate(loader):
                loss = model(batch).mean() / N
                loss.backward()
                if (step + 1) % N == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
    """)
    (scheduled,) = check_source(source, select=["LC105"])
    assert scheduled.fix_message is not None and scheduled.fix_safe is False
    (plain,) = check_source(source.replace("            scheduler.step()\n", ""), select=["LC105"])
    assert plain.fix_message is not None and plain.fix_safe is True
