"""Unit tests of the pure parts: selection, loss-scale reading, memory-growth verdicts."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from loopcheck.runtime.checks.memory_growth import detect_growth
from loopcheck.runtime.hooks.loss_scale import inspect_loss
from loopcheck.runtime.selection import Selection

MIB = 1 << 20


def test_selection_follows_the_static_checker() -> None:
    s = Selection.parse(select=["LC1", "clip-before-unscale"], ignore="LC109")
    assert s.enabled("LC101") and s.enabled("LC201")
    assert not s.enabled("LC109") and not s.enabled("LC301")
    assert s.enabled("LC110")  # a selected prefix includes its opt-in codes, as in `check`
    assert not Selection.parse().enabled("LC110")  # opt-in: off by default
    assert Selection.parse(select="excessive-accumulation").enabled("LC110")
    assert Selection.parse(select="LC1,LC2", extend_select=None).enabled("LC207")
    assert not Selection.parse(select="ALL").enabled("LC206")  # static-only code
    assert Selection.parse().enabled("LC605")
    with pytest.raises(ValueError):
        Selection.parse(select="bogus")


def test_project_config_gives_defaults_that_the_command_line_overrides(tmp_path) -> None:
    from loopcheck.runtime.project_config import project_config, selection_for

    (tmp_path / "pyproject.toml").write_text(
        '[tool.loopcheck]\nignore = ["LC101"]\nextend-select = ["LC110"]\n'
        '[tool.loopcheck.lr-scaling]\nreference-batch-size = 256\nreference-lr = 0.1\n')
    config = project_config(tmp_path)
    assert config.options.lr_scaling.expected_lr(128) == pytest.approx(0.05)
    default = selection_for(config, None, None)
    assert not default.enabled("LC101") and default.enabled("LC110") and default.enabled("LC102")
    narrowed = selection_for(config, ["LC2"], ["LC207"])
    assert narrowed.enabled("LC201") and not narrowed.enabled("LC110") and not narrowed.enabled("LC207")


def _loss_node(loss: torch.Tensor) -> object:
    return loss.grad_fn


@pytest.mark.parametrize("make, factor, normalised, mean", [
    (lambda out, y: nn.functional.mse_loss(out, y) / 4, 0.25, False, True),
    (lambda out, y: nn.functional.mse_loss(out, y) * 0.5, 0.5, False, True),
    (lambda out, y: nn.functional.mse_loss(out, y), 1.0, False, True),
    (lambda out, y: out.mean() / 2 / 2, 0.25, False, True),
    (lambda out, y: nn.functional.mse_loss(out, y, reduction="sum") / 7, 1 / 7, True, False),
    # a CPU tensor divisor is a host value: read like a number
    (lambda out, y: nn.functional.mse_loss(out, y) / torch.tensor(3.0), 1 / 3, False, True),
])
def test_loss_scale_is_read_from_the_graph(make, factor, normalised, mean) -> None:
    out, y = nn.Linear(3, 1)(torch.randn(5, 3)), torch.randn(5, 1)
    scale = inspect_loss(make(out, y).grad_fn)
    assert scale is not None
    assert scale.factor == pytest.approx(factor)
    assert (scale.normalised, scale.mean_reduced) == (normalised, mean)


def test_unknown_loss_shapes_are_not_judged() -> None:
    out = nn.Linear(3, 2)(torch.randn(5, 3))
    scale = inspect_loss(out.max().grad_fn)
    assert scale is not None and not scale.known


@pytest.mark.parametrize("make, factor, known", [
    (lambda a, b: a + 0.01 * b, 1.0, True),  # main loss + weighted auxiliary loss
    (lambda a, b: (a + b) / 4, 0.25, True),
    (lambda a, b: a / 4 + 0.01 * b / 4, 0.25, True),
    (lambda a, b: a / 4 + 1e-4 * b.sum(), 0.25, True),  # a sum-reduced term does not decide
    (lambda a, b: a / 4 - b, 1.0, True),  # a difference: the term with the larger weight
])
def test_sums_of_losses_are_read_through(make, factor: float, known: bool) -> None:
    out = nn.Linear(3, 2)(torch.randn(5, 3))
    a, b = out[:, 0].pow(2).mean(), out[:, 1].pow(2).mean()
    scale = inspect_loss(make(a, b).grad_fn)
    assert scale is not None and scale.known == known and scale.factor == pytest.approx(factor)


def _series(values: list[float]) -> list[tuple[int, int]]:
    return [(step, int(v * MIB)) for step, v in enumerate(values, start=1)]


def test_steady_growth_is_found() -> None:
    growth = detect_growth(_series([100, 200, 300] + [300 + 4 * i for i in range(20)]))
    assert growth is not None and growth.per_step == pytest.approx(4 * MIB, rel=0.01)


@pytest.mark.parametrize("values", [
    [100 + (i % 3) for i in range(30)],  # flat with allocator noise
    [100 + 50 * (i % 2) for i in range(30)],  # sawtooth: freed every other step
    [100, 400, 800, 1200] + [1200] * 20,  # growth only during warm-up
    [1000 + 0.1 * i for i in range(30)],  # rising by too little to matter
    [100 + 4 * i for i in range(6)],  # too few steps
])
def test_no_growth_verdict_without_steady_growth(values: list[float]) -> None:
    assert detect_growth(_series(values)) is None


def test_memory_rising_in_stairs_is_found() -> None:
    """One rise per epoch (a validation loss summed with its graph): 225 MiB to 485 MiB over
    120 steps in 6 epochs, as measured on an H200; nearly all step-to-step deltas are zero."""
    values = [225 + 52 * (step // 20) + (step % 3) * 0.01 for step in range(120)]
    growth = detect_growth(_series(values))
    assert growth is not None and 250 <= (growth.end_bytes - growth.start_bytes) >> 20 <= 260


@pytest.mark.parametrize("values", [
    [225] * 60 + [485] * 60,  # one late allocation: a step up, not a leak
    [225 + 52 * ((step // 20) % 2) for step in range(120)],  # up and back down every epoch
])
def test_a_single_step_up_or_a_square_wave_is_not_growth(values: list[float]) -> None:
    assert detect_growth(_series(values)) is None


_HELPER = '''from loopcheck.runtime.step_site import step_sites


def scale_and_step(loss, optimizer, update_grad=True):
    if update_grad:
        return step_sites(optimizer)


def step_each(optimizers, optimizer):
    for _ in optimizers:
        return step_sites(optimizer)


def step_own(loss):
    return step_sites(OPTIMIZER)


OPTIMIZER = object()
'''
_LOOP = '''from scaler_helper import scale_and_step, step_each, step_own


def local_helper(optimizer):
    return step_sites(optimizer)


def train(optimizer, step_sites):
    globals()["step_sites"] = step_sites
    for i in range(2):
        helper = scale_and_step(None, optimizer, update_grad=(i + 1) % 2 == 0)
        looping = step_each([optimizer], optimizer)
        local = local_helper(optimizer)
    return helper, looping, local
'''


def test_a_step_in_a_helper_of_another_module_is_placed_at_the_loops_call(tmp_path, monkeypatch) -> None:
    from loopcheck.runtime import step_site

    (tmp_path / "scaler_helper.py").write_text(_HELPER)
    (tmp_path / "train_loop.py").write_text(_LOOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    import train_loop

    step_site.forget()
    helper, looping, local = train_loop.train(object(), step_site.step_sites)
    helper_file, loop_file = str(tmp_path / "scaler_helper.py"), str(tmp_path / "train_loop.py")
    assert helper == ((helper_file, 6), (loop_file, 11))  # the loop's call holds update_grad=
    assert looping == ((helper_file, 11), None)  # the helper's own loop steps
    assert local == ((loop_file, 5), None)  # a helper of the loop's own file
    assert train_loop.step_own(None) == ((helper_file, 15), None)  # not handed the optimizer
