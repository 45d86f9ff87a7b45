"""Suppressing one finding: `# noqa`, `# noqa: CODE`, `# loopcheck: ignore[CODE]`."""

from __future__ import annotations

import pytest

from loopcheck.engine import check_source
from loopcheck.suppression import suppressed_codes

TEMPLATE = """\
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad(){comment}
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0 or (i + 1) == len(loader):
        optimizer.step()
"""


@pytest.mark.parametrize("comment", [
    "  # noqa: LC101", "  # noqa", "  # NOQA:LC101", "  # noqa: E501, LC101", "  # loopcheck: ignore[LC101]",
    "  # noqa: zero-grad-in-accumulation", "  # loopcheck: ignore[LC102, zero-grad-in-accumulation]",
])
def test_suppressed(comment: str) -> None:
    assert check_source(TEMPLATE.format(comment=comment)) == []


@pytest.mark.parametrize("comment", ["", "  # noqa: LC102", "  # noqa: E501", "  # loopcheck: ignore[LC301]",
                                     "  # LC101 is intended"])
def test_not_suppressed(comment: str) -> None:
    assert [f.code for f in check_source(TEMPLATE.format(comment=comment))] == ["LC101"]


def test_noqa_on_first_line_of_a_multiline_statement() -> None:
    source = """\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    torch.nn.utils.clip_grad_norm_(  # noqa: LC107
        model.parameters(), 1.0
    )
    if (i + 1) % accum == 0 or (i + 1) == len(loader):
        optimizer.step()
        optimizer.zero_grad()
"""
    assert check_source(source) == []
    assert [f.line for f in check_source(source.replace("  # noqa: LC107", ""))] == [4]


def test_parse_of_comment_forms() -> None:
    assert suppressed_codes("x = 1  # noqa") == {"*"}
    assert suppressed_codes("x = 1  # noqa: LC101,LC102") == {"LC101", "LC102"}
    assert suppressed_codes("x = 1  # noqa: E501") == set()
    assert suppressed_codes("x = 1") == set()


def test_unknown_code_in_a_suppression_comment_is_reported(project, run_cli) -> None:
    (project / "train.py").write_text(TEMPLATE.format(comment="  # noqa: LC10l"))
    (project / "other.py").write_text("x = 1  # noqa: E501, LC999\ny = 2  # loopcheck: ignore[zero-grad-in-acumulation]\n"
                                      "z = 3  # noqa: E501 because explanation-text\n")
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert out.splitlines()[:4] == [
        "other.py:1:22: LC002 `LC999` in a suppression comment is not a loopcheck code: it silences nothing",
        "other.py:2:28: LC002 `zero-grad-in-acumulation` in a suppression comment is not a loopcheck code: it "
        "silences nothing (did you mean `zero-grad-in-accumulation`?)",
        out.splitlines()[2],
        "train.py:2:36: LC002 `LC10l` in a suppression comment is not a loopcheck code: it silences nothing "
        "(did you mean `LC101`?)",
    ]
    assert out.splitlines()[2].startswith("train.py:2:5: LC101 ")  # the typo silenced nothing
    (project / "train.py").write_text(TEMPLATE.format(comment="  # noqa: LC101"))
    (project / "other.py").write_text("x = 1  # noqa: E501\n")
    assert run_cli("check") == (0, "All checks passed! (2 files checked)\n", "")
