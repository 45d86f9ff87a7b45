"""The training-loop model itself: variants under invariant flags, guards, counters."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loopcheck.model import FileModel, GuardKind, Kind, Phase, Style, build
from loopcheck.model.variants import MAX_FLAGS


def _model(code: str) -> FileModel:
    source = textwrap.dedent(code)
    return build(cst.parse_module(source), source)


def _step_guard(code: str):
    [training] = _model(code).training_loops
    return training.step_guard


def test_an_if_else_on_a_flag_gives_one_variant_per_side() -> None:
    model = _model("""
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if args.deepspeed:
                engine.backward(loss)
                engine.step()
            else:
                (loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    styles = {tuple(t.assumptions.items()): t.style for t in model.training_loops}
    assert styles == {(("args.deepspeed", True),): Style.FRAMEWORK, (("args.deepspeed", False),): Style.GUARDED}


@pytest.mark.parametrize("test, key", [
    ("self.args.get('use_deepspeed', False)", "self.args.get('use_deepspeed',False)"),
    ("config.get(\"deepspeed\")", "config.get(\"deepspeed\")"),
])
def test_a_setting_read_from_a_config_mapping_is_a_flag(test: str, key: str) -> None:
    model = _model(f"""
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if {test}:
                engine.backward(loss)
                engine.step()
            else:
                (loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    styles = {tuple(t.assumptions.items()): t.style for t in model.training_loops}
    assert styles == {((key, True),): Style.FRAMEWORK, ((key, False),): Style.GUARDED}


@pytest.mark.parametrize("test", ["batch.get('deepspeed', False)", "self.args.get(name, False)",
                                  "self.args.get('deepspeed', default())"])
def test_a_lookup_that_may_vary_is_no_flag(test: str) -> None:
    model = _model(f"""
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if {test}:
                engine.backward(loss)
                engine.step()
            else:
                (loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    assert [t.style for t in model.training_loops] == [Style.FRAMEWORK]


def test_variants_share_syntax_nodes_and_find_every_variant_of_a_loop() -> None:
    model = _model("""
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)
    first, second = model.training_loops
    assert first.loop is not second.loop and first.loop.node is second.loop.node
    assert model.variants(first) == [first, second]
    [zero_a], [zero_b] = first.events(Kind.ZERO_GRAD), second.events(Kind.ZERO_GRAD)
    assert zero_a is not zero_b and zero_a.node is zero_b.node and zero_a.loop is first.loop


def test_a_flag_with_events_on_one_side_is_assumed_set_not_enumerated() -> None:
    [training] = _model("""
        for i, (x, y) in enumerate(loader):
            (criterion(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                if self.use_ema:
                    self.ema.update(model)
    """).training_loops
    assert training.assumptions == {"self.use_ema": True}
    [ema] = training.events(Kind.EMA_UPDATE)
    assert training.guard(ema).kind is GuardKind.PERIODIC  # an attribute flag, read as a flag


def test_the_number_of_variants_is_bounded() -> None:
    branches = "".join(f"""
            if args.flag{k}:
                opt{k}.zero_grad()
            else:
                model.zero_grad()""" for k in range(MAX_FLAGS + 3))
    model = _model(f"""
        for x, y in loader:{branches}
            criterion(model(x), y).backward()
            optimizer.step()
    """)
    assert 1 < len(model.training_loops) <= 2 ** MAX_FLAGS


def test_a_variant_that_calls_an_object_assumed_none_cannot_run() -> None:
    model = _model("""
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            if args.amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
    """)
    runnable = [t.assumptions for t in model.training_loops]
    assert {"args.amp": True, "scaler": False} not in runnable
    assert {"args.amp": True, "scaler": True} in runnable


def test_complementary_backward_branches_run_on_every_micro_batch() -> None:
    [training] = _model("""
        for i, (x, y) in enumerate(loader):
            if (i + 1) % accum != 0:
                with model.no_sync():
                    criterion(model(x), y).backward()
            else:
                criterion(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
    """).training_loops
    assert training.style is Style.GUARDED
    assert all(training.every_iteration(b) for b in training.backwards)
    assert not any(training.guard(b).always for b in training.backwards)


def test_a_step_under_the_boundary_and_not_the_boundary_never_runs() -> None:
    [training] = _model("""
        for i, (x, y) in enumerate(loader):
            need = (i + 1) % accum == 0
            criterion(model(x), y).backward()
            if not need:
                if need:
                    optimizer.step()
            if need:
                optimizer.step()
                optimizer.zero_grad()
    """).training_loops
    assert training.style is Style.GUARDED and len(training.steps) == 1


def test_a_second_condition_inside_the_step_branch_is_a_partial_boundary() -> None:
    guard = _step_guard("""
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward()
            if (i + 1) % accum == 0:
                if torch.isfinite(grad_norm):
                    optimizer.step()
                optimizer.zero_grad()
    """)
    assert guard.kind is GuardKind.PERIODIC and guard.partial and guard.phase is Phase.BOUNDARY


@pytest.mark.parametrize(("loop", "phase", "restarts"), [
    # a boundary flag built over several statements
    ("""
    for i, (x, y) in enumerate(loader):
        need = False
        if (i + 1) % N == 0 or i == len(loader) - 1:
            need = True
        criterion(model(x), y).backward()
        if need:
            optimizer.step()
    """, Phase.BOUNDARY, True),
    # a resumed enumerate start, read at its fresh-run value
    ("""
    start_step = 0
    if args.resume:
        start_step = ckpt["step"]
    for step, (x, y) in enumerate(loader, start=start_step):
        criterion(model(x), y).backward()
        if step % N == 0:
            optimizer.step()
    """, Phase.START, True),
    ("""
    for step, (x, y) in enumerate(loader, start=start_step + 1):
        criterion(model(x), y).backward()
        if step % N == 0:
            optimizer.step()
    """, Phase.UNKNOWN, True),
    # a global counter loaded from a checkpoint on resume, incremented before the test
    ("""
    global_step = 0
    if args.resume:
        global_step = ckpt["global_step"]
    for epoch in range(epochs):
        for x, y in loader:
            criterion(model(x), y).backward()
            global_step += 1
            if global_step % N == 0:
                optimizer.step()
    """, Phase.BOUNDARY, False),
    # yolov5: ni = i + nb * epoch and a threshold against the last step
    ("""
    last_opt_step = -1
    for epoch in range(epochs):
        pbar = enumerate(train_loader)
        pbar = tqdm(pbar, total=nb)
        for i, (imgs, targets) in pbar:
            ni = i + nb * epoch
            criterion(model(imgs), targets).backward()
            if ni - last_opt_step >= accumulate:
                optimizer.step()
                last_opt_step = ni
    """, Phase.BOUNDARY, False),
    # yolov7: the same counter tested with `% accumulate == 0` (steps on the first micro-batch)
    ("""
    start_epoch, best_fitness = 0, 0.0
    for epoch in range(start_epoch, epochs):
        for i, (imgs, targets) in enumerate(loader):
            ni = i + nb * epoch
            criterion(model(imgs), targets).backward()
            if ni % accumulate == 0:
                optimizer.step()
    """, Phase.START, False),
    # a micro-batch counter set at the epoch start and reset in the step branch
    ("""
    for epoch in range(epochs):
        n = 0
        for x, y in loader:
            criterion(model(x), y).backward()
            n += 1
            if n >= N:
                optimizer.step()
                n = 0
    """, Phase.BOUNDARY, True),
    ("""
    n = 0
    for x, y in loader:
        criterion(model(x), y).backward()
        n += 1
        if n > N:
            optimizer.step()
            n = 0
    """, Phase.LATE, True),
    # advanced only where it does not step: the count stands still on the stepping micro-batch
    ("""
    n = 0
    for x, y in loader:
        criterion(model(x), y).backward()
        if n == N:
            n = 0
            optimizer.step()
        else:
            n += 1
    """, Phase.LATE, True),
    ("""
    n = 0
    for x, y in loader:
        criterion(model(x), y).backward()
        if n == N - 1:
            n = 0
            optimizer.step()
        else:
            n += 1
    """, Phase.BOUNDARY, True),
    # reset to 0 where it is a multiple of N: the count runs on across the epochs it was set before
    ("""
    n = 0
    for epoch in range(epochs):
        for x, y in loader:
            criterion(model(x), y).backward()
            n += 1
            if n % N == 0:
                optimizer.step()
                n = 0
    """, Phase.BOUNDARY, False),
    ("""
    for epoch in range(epochs):
        n = 0
        for x, y in loader:
            criterion(model(x), y).backward()
            n += 1
            if n % N == 0:
                optimizer.step()
                n = 0
    """, Phase.BOUNDARY, True),
])
def test_step_counters_as_real_code_writes_them(loop: str, phase: Phase, restarts: bool) -> None:
    guard = _step_guard(loop)
    assert guard.kind is GuardKind.PERIODIC
    assert (guard.phase, guard.restarts) == (phase, restarts)


@pytest.mark.parametrize(("start", "phase"), [
    # optimizer steps done, in micro-batches: 0 on a fresh run whatever the factor
    ("completed_steps * args.gradient_accumulation_steps", Phase.START),
    ("args.gradient_accumulation_steps * completed_steps", Phase.START),
    # a local computed once before the loop from that counter (`global_step % updates_per_epoch`)
    ("done_in_epoch * N", Phase.START),
    ("done_in_epoch * N + 1", Phase.BOUNDARY),  # 1-based: `step % N == 0` is right
    # a factor whose fresh value is unknown, or a product of two such: no start known
    ("args.first_step * N", Phase.UNKNOWN),
    ("offset * N", Phase.UNKNOWN),
])
def test_a_resumed_start_is_read_at_its_fresh_run_value(start: str, phase: Phase) -> None:
    guard = _step_guard(f"""
    completed_steps = 0
    if args.resume:
        completed_steps = ckpt["completed_steps"]
    done_in_epoch = completed_steps % (len(loader) // N)
    offset = resume_offset(args)
    for step, (x, y) in enumerate(loader, start={start}):
        criterion(model(x), y).backward()
        if step % N == 0:
            optimizer.step()
    """)
    assert guard.kind is GuardKind.PERIODIC and guard.phase is phase


@pytest.mark.parametrize("extra, periodic", [
    ("", True),
    ("        if loss.item() > 10:\n            losses.pop()\n", False),  # the list does not grow every iteration
])
def test_the_length_of_a_list_appended_once_per_iteration_counts_micro_batches(extra: str, periodic: bool) -> None:
    guard = _step_guard(f"""
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y) / N
        losses.append(loss.item())
{extra}        loss.backward()
        if len(losses) % N == 0:
            optimizer.step()
            optimizer.zero_grad()
    """)
    assert (guard is not None and guard.kind is GuardKind.PERIODIC) is periodic


@pytest.mark.parametrize(("skip", "kind", "flush"), [
    # `continue` unless the window is full or the batch is the pass's last: a step that flushes
    ("(i + 1) % N != 0 and (i + 1) != len(loader)", GuardKind.PERIODIC, True),
    ("(i + 1) != len(loader) and (i + 1) % N != 0", GuardKind.PERIODIC, True),
    ("(i + 1) % N != 0 and not is_last", GuardKind.PERIODIC, True),
    ("(i + 1) % N != 0 and i < len(loader) - 1", GuardKind.PERIODIC, True),
    ("(i + 1) % N != 0", GuardKind.PERIODIC, False),
    # skipping the last batch itself is not stepping it: no flush can be claimed
    ("(i + 1) % N != 0 and (i + 1) == len(loader)", None, None),
    ("(i + 1) != len(loader)", None, None),
])
def test_a_continue_unless_boundary_or_last_is_a_flushing_step(skip: str, kind: GuardKind | None,
                                                               flush: bool | None) -> None:
    guard = _step_guard(f"""
    for i, (x, y) in enumerate(loader):
        is_last = i == len(loader) - 1
        (criterion(model(x), y) / N).backward()
        if {skip}:
            continue
        optimizer.step()
        optimizer.zero_grad()
    """)
    assert (guard.kind if guard is not None else None) is kind
    if flush is not None:
        assert guard.flush is flush


def test_a_loop_top_skip_does_not_hide_the_step_condition() -> None:
    model = _model("""
        for epoch in range(epochs):
            for step, (x, y) in enumerate(loader):
                if step < resume_step:
                    continue
                if not torch.isfinite(x).all():
                    continue
                criterion(model(x), y).backward()
                if (step + 1) % N == 0:
                    optimizer.step()
    """)
    [training] = model.training_loops
    assert training.step_guard.phase is Phase.BOUNDARY and len(training.loop.skips) == 2


def test_an_upper_case_switch_assigned_once_is_a_constant() -> None:
    [training] = _model("""
        USE_EMA = False
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            if USE_EMA:
                ema.update(model)
    """).training_loops
    assert training.events(Kind.EMA_UPDATE) == []


def test_a_flag_bound_to_a_literal_at_the_call_is_not_enumerated() -> None:
    model = _model("""
        def train_one_epoch(model, loader, optimizer, scaler, use_amp):
            for x, y in loader:
                optimizer.zero_grad()
                if use_amp:
                    scaler.scale(criterion(model(x), y)).backward()
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    criterion(model(x), y).backward()
                    optimizer.step()

        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer, scaler, use_amp=True)
    """)
    assert [t.assumptions for t in model.training_loops] == [{"use_amp": True}]


def test_a_step_function_that_steps_on_a_call_counter_is_a_training_loop_over_its_calls() -> None:
    model = _model("""
        class Trainer:
            def optimize(self, loss):
                loss.backward()
                if self.n_iter % self.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()

            def iter(self):
                self.n_iter += 1
    """)
    [training] = model.training_loops
    assert not training.loop.is_loop and training.loop.function.name.value == "optimize"
    assert training.style is Style.GUARDED and training.step_guard.index == "self.n_iter"


@pytest.mark.parametrize("body", [
    "loss.backward()\nself.optimizer.step()\nself.optimizer.zero_grad()",  # one step per call
    "loss.backward()\nif self.use_amp:\n    self.optimizer.step()",  # a flag, not a counter
    "loss.backward()\nif self.steps % 100 == 0:\n    self.optimizer.step()",  # never incremented here
])
def test_a_step_function_without_a_call_counter_is_no_training_loop(body: str) -> None:
    code = "class Trainer:\n    def train_step(self, loss):\n" + textwrap.indent(body, " " * 8) + "\n"
    assert _model(code).training_loops == []


_SYNCED_LOOP = """
from accelerate import Accelerator
def train(model, loader, optimizer, max_train_steps, epochs):
    accelerator = Accelerator(gradient_accumulation_steps=4)
    done = 0
    for epoch in range(epochs):
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(batch))
                optimizer.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                done += 1
            {extra}
            if done >= max_train_steps:
                break
"""


@pytest.mark.parametrize(("extra", "counts_updates"), [
    ("pass", True),
    ("done += 1", False),  # also counted on every micro-batch: not a count of updates
])
def test_updates_bound_reads_counter_moved_only_on_synced_micro_batches(extra, counts_updates):
    from loopcheck.model.accelerate import updates_bound
    from loopcheck.model.syntax import source
    model = _model(_SYNCED_LOOP.format(extra=extra))
    bound = updates_bound(model.training_loops[0].loop)
    assert (bound is not None and source(bound) == "max_train_steps") is counts_updates


_TOP_BREAK = """
    def train(model, optimizer, it, n, N):
        for epoch in range(10):
            for i in range(n):
                if i >= n:
                    break
                x, y = next(it)
                {rebind}
                loss = criterion(model(x), y) / N
                loss.backward()
                if (i + 1) % N == 0:
                    optimizer.step()
                    optimizer.zero_grad()

    train(model, optimizer, iter(train_loader), len(train_loader), 4)
"""


@pytest.mark.parametrize(("rebind", "stops"), [("pass", False), ("n -= 1", True), ("i += 1", True)])
def test_a_loop_top_break_the_range_never_reaches_does_not_end_the_epoch(rebind: str, stops: bool) -> None:
    from loopcheck.model.windows import partial_window

    model = _model(_TOP_BREAK.format(rebind=rebind))
    [training] = model.training_loops
    # `if i >= n: break` in `range(n)` never fires, so the epoch's tail is left; once the loop changes
    # `n` or `i`, it may fire and end the epoch on a whole window
    assert (partial_window(model, training) is None) is stops


_TOP_SKIP = """
    def train(model, optimizer, loader, skipped, N):
        for epoch in range(10):
            for i, (x, y) in enumerate(loader):
                if {test}:
                    {body}
                    continue
                loss = criterion(model(x), y) / N
                loss.backward()
                if (i + 1) % N == 0:
                    optimizer.step()
                    optimizer.zero_grad()
"""


@pytest.mark.parametrize(("test", "body", "stops"), [
    ("skipped > 0", "skipped -= 1", False),  # counts down the batches done before a resume: a prefix
    ("skipped != 0", "skipped -= 1", False),
    ("skipped > 0", "pass", True),  # nothing counts down: it may skip the rest of the pass
    ("skipped > 0", "other -= 1", True),
    ("skipped > 0", "skipped -= 2", True),
    ("i > skipped", "skipped -= 1", True),  # skips the batches after a point: the tail
])
def test_a_loop_top_skip_that_counts_down_a_prefix_does_not_end_the_epoch(test: str, body: str, stops: bool) -> None:
    from loopcheck.model.windows import partial_window

    model = _model(_TOP_SKIP.format(test=test, body=body))
    [training] = model.training_loops
    assert (partial_window(model, training) is None) is stops
