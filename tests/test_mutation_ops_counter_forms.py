"""benchmarks/mutation/ops_counter_forms: a window's step condition rewritten into another real form,
only where the rewrite steps on the same micro-batches."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.mutation import ops_counter_forms as forms  # noqa: E402

WINDOW = """\
import torch
from tqdm import tqdm

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 2), torch.randn(4, 1))] * 10
N = 4
for i, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean() / N
    loss.backward()
    if (i + 1) % N == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
"""


def _made(source: str) -> dict[str, list[str]]:
    tree = ast.parse(source)
    return {op.__name__: [m.source for m in op(source, tree)] for op in forms.OPERATORS}


def _steps(source: str) -> list[int]:
    """The micro-batches (0-based) after which the window steps, by running the loop's counter."""
    tree = ast.parse(source)
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For))
    test = next(n for n in ast.walk(loop) if isinstance(n, ast.If))
    start = int(ast.unparse(loop.iter.args[1])) if len(loop.iter.args) > 1 else 0
    flag = next((n for n in ast.walk(loop) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "update_now"),
                None)
    condition = flag.value if flag is not None else test.test
    return [k for k in range(10) if eval(compile(ast.Expression(condition), "c", "eval"), {"i": k + start, "N": 4})]


def test_every_form_steps_where_the_original_does() -> None:
    made = _made(WINDOW)
    for name in ("one_based_correct", "flag_correct", "tqdm_correct"):
        assert len(made[name]) == 1, name
        compile(made[name][0], name, "exec")
        assert _steps(made[name][0]) == _steps(WINDOW) == [3, 7]
    assert "enumerate(loader, 1)" in made["one_based_correct"][0]
    assert "enumerate(tqdm(loader))" in made["tqdm_correct"][0]
    assert "if update_now:" in made["flag_correct"][0]


def test_pitfalls_are_injected_in_each_form() -> None:
    made = _made(WINDOW)
    for form in ("one_based", "flag", "tqdm"):
        for pitfall in ("zero_grad_every_micro_batch", "loss_not_divided", "clip_every_micro_batch"):
            assert len(made[f"{form}_{pitfall}"]) == 1, (form, pitfall)
    off = made["one_based_boundary_off_by_one"]
    assert len(off) == 1 and _steps(off[0]) == [2, 6]  # the first window has N - 1 micro-batches


def test_an_index_read_elsewhere_is_not_shifted() -> None:
    source = WINDOW.replace("loss.backward()", "loss.backward()\n    print(i)")
    made = _made(source)
    assert made["one_based_correct"] == [] and made["one_based_zero_grad_every_micro_batch"] == []
    assert len(made["flag_correct"]) == 1


def test_no_tqdm_form_without_tqdm_and_no_flag_where_the_test_is_a_flag() -> None:
    assert _made(WINDOW.replace("from tqdm import tqdm\n", "\n"))["tqdm_correct"] == []
    flagged = WINDOW.replace("    if (i + 1) % N == 0:", "    boundary = (i + 1) % N == 0\n    if boundary:")
    assert all(not made for made in _made(flagged).values())
