"""libcst parses only the statements a rule reads (loopcheck.excerpt), and finds what the whole file gives."""

from __future__ import annotations

import ast
import textwrap

import pytest

from loopcheck.engine import analyse, check_text
from loopcheck.excerpt import excerpt
from loopcheck.rules import RULES
from loopcheck.selection import resolve

WORDS = RULES["LC206"].reads_statements_with

FILE = textwrap.dedent('''\
    """A model file with a deprecated autocast."""
    import torch
    from torch.cuda.amp import autocast as ac


    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2


    def run(net, x):
        with ac():  # loopcheck: noqa: LC999
            return net(x)


    def helper():
        from torch.cuda import amp
        return amp


    a = 1; b = torch.cuda.amp.GradScaler(
        enabled=True)


    class Op(torch.autograd.Function):
        """A custom op."""

        def backward(ctx, x):
            return x

        @torch.cuda.amp.custom_fwd
        def forward(ctx, x):
            return x
''')


def test_statements_that_mention_nothing_read_are_blank_lines() -> None:
    part, tree = excerpt(FILE, ast.parse(FILE), WORDS)
    lines, kept = FILE.split("\n"), part.split("\n")
    assert len(kept) == len(lines)
    assert all(k in ("", line) for k, line in zip(kept, lines))  # blanked or the same, never moved
    assert "class Net" not in part and "def run" in part  # `ac` is bound to torch.cuda.amp.autocast
    assert "def helper" in part  # an import inside
    assert "a = 1; b = torch.cuda.amp.GradScaler(\n    enabled=True)" in part  # one line, kept together
    assert "def backward" not in part and '"""A custom op."""' in part and "def forward(ctx" in part  # its methods
    assert [type(s).__name__ for s in tree.body] == [type(s).__name__ for s in ast.parse(part).body]


def test_a_file_with_lone_carriage_returns_is_kept_whole() -> None:
    source = FILE.replace("\n", "\r")
    assert excerpt(source, ast.parse(source), WORDS)[0] is source


SOURCES = [textwrap.dedent(text) + "\n\nclass Padding:\n    def f(self):\n        return 1\n"
           for rule in (RULES["LC206"],) for text in (*rule.VALID, *rule.INVALID)] + [FILE]


@pytest.mark.parametrize("source", SOURCES)
def test_findings_are_those_of_the_whole_file(source: str) -> None:
    whole = [finding for finding, _ in analyse(source, "f.py", resolve(), whole=True)[1]]
    assert check_text(source, "f.py", resolve()) == whole


def test_the_check_parses_only_the_excerpt_and_a_fix_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst

    parsed: list[str] = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda text: parsed.append(text) or real(text))
    check_text(FILE, "f.py", resolve())
    analyse(FILE, "f.py", resolve())  # --fix applies edits to the module: the whole file
    assert ["class Net" in text for text in parsed] == [False, True]
