"""Lightning Fabric's mixed precision: under ``Fabric(precision="16-mixed")`` (or its aliases ``"16"``
and ``16``) ``fabric.backward(loss)`` scales the loss with a GradScaler, and a torch clip before the
optimizer step clips scaled gradients (LC201); ``fabric.clip_gradients`` unscales first."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source

ROOT = Path(__file__).parents[1]
FLAGGED = (ROOT / "rules" / "fixtures" / "LC201" / "fabric_16_mixed_torch_clip.py").read_text()
LITERAL = 'precision="16-mixed"'


def _lc201(source: str) -> list[str]:
    return [f.message for f in check_source(source) if f.code == "LC201"]


@pytest.mark.parametrize("precision", ['"16-mixed"', '"16"', "16"])
def test_precisions_that_scale_the_loss(precision: str) -> None:
    assert LITERAL in FLAGGED
    assert len(_lc201(FLAGGED.replace(LITERAL, f"precision={precision}"))) == 1


@pytest.mark.parametrize("precision", ['"bf16-mixed"', '"32-true"', '"16-true"', "32", "cfg.precision"])
def test_precisions_without_a_scaler_or_unknown(precision: str) -> None:
    assert _lc201(FLAGGED.replace(LITERAL, f"precision={precision}")) == []


@pytest.mark.parametrize("change", [
    ('accelerator="cuda"', 'accelerator="cpu"'),  # Fabric turns 16-mixed into bf16-mixed on a CPU
    ('accelerator="cuda"', 'accelerator="cuda", strategy="deepspeed"'),  # DeepSpeed's own precision plugin
    ('accelerator="cuda"', 'accelerator="cuda", plugins=[plugin]'),  # a precision plugin of the user's
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
     "fabric.clip_gradients(model, optimizer, max_norm=max_norm)"),
])
def test_not_a_scaled_torch_clip(change: tuple[str, str]) -> None:
    old, new = change
    assert old in FLAGGED
    assert _lc201(FLAGGED.replace(old, new)) == []


@pytest.mark.parametrize("option, note", [
    ('parser.add_argument("--precision", default="16-mixed")', '"16-mixed", its default'),
    ('parser.add_argument("--precision", default="bf16-mixed", choices=["bf16-mixed", "16-mixed"])',
     '"16-mixed", one of its choices'),
    ('parser.add_argument("--precision", default="bf16-mixed")', None),
])
def test_a_precision_option(option: str, note: str | None) -> None:
    source = FLAGGED.replace(LITERAL, "precision=args.precision").replace(
        "    args = parser.parse_args()\n", f"    {option}\n    args = parser.parse_args()\n")
    found = _lc201(source)
    if note is None:
        assert found == []
    else:
        assert len(found) == 1 and f"(only when `args.precision` is {note})" in found[0]
