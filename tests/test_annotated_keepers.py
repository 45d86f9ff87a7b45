"""A method of another module that keeps an argument annotated as a plain number (`used_tokens:
int`, ludwig's progress tracker) is declared to keep no tensor: what the loop hands it is not LC601,
however the loop computed it. The same method without the annotation keeps the graph."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

MEASURES = """
    def token_count(outputs):
        return outputs.sum(dim=1).mean(dim=0)
"""

TRACKER = """
    class ProgressTracker:
        def __init__(self):
            self.steps = 0
            self.total_tokens_used = 0
            self.incremental_step_token_usage = {}

        def set_token_usage_for_this_step(self, used_tokens: int):
            self.incremental_step_token_usage[str(self.steps)] = used_tokens
            self.total_tokens_used += used_tokens
"""

LOOP = """
    from measures import token_count
    from trainer_utils import ProgressTracker


    def train(model, loader, optimizer, criterion):
        progress_tracker = ProgressTracker()
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            used_tokens = token_count(out)
            progress_tracker.set_token_usage_for_this_step(used_tokens)
            progress_tracker.steps += 1
"""


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    return [line for line in out.splitlines() if ": LC" in line]


@pytest.mark.parametrize("annotation", ["int", "float"])
def test_a_parameter_annotated_as_a_number_keeps_no_graph(project: Path, run_cli, annotation: str) -> None:
    _write(project, {"train.py": LOOP, "measures.py": MEASURES,
                     "trainer_utils.py": TRACKER.replace("used_tokens: int", f"used_tokens: {annotation}")})
    assert _codes(run_cli) == []


def test_the_same_parameter_without_its_annotation_keeps_the_graph(project: Path, run_cli) -> None:
    _write(project, {"train.py": LOOP, "measures.py": MEASURES,
                     "trainer_utils.py": TRACKER.replace("used_tokens: int", "used_tokens")})
    found = _codes(run_cli)
    assert len(found) == 1 and found[0].startswith("train.py:16:") and " LC601 " in found[0]
    assert "(kept by trainer_utils.py:" in found[0]


def test_a_tensor_annotation_still_keeps_the_graph(project: Path, run_cli) -> None:
    _write(project, {"train.py": LOOP, "measures.py": MEASURES,
                     "trainer_utils.py": TRACKER.replace("used_tokens: int", "used_tokens: torch.Tensor")})
    assert len(_codes(run_cli)) == 1
