"""A body written after the colon (``if c: opt.step(); opt.zero_grad()``, ``for p in m.parameters():
p.requires_grad = False``, ``else: loss.backward()``) is modelled as the same statements written as
an indented block: every rule reports the same findings, and stays silent on the same code.

The first test rewrites every fixture's short bodies onto their header's line (the body's lines left
blank, so that every other line keeps its number) and compares the findings of both spellings; the
others pin the shapes seen in real training loops."""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

ROOT = Path(__file__).resolve().parent.parent
EVERY = resolve(["ALL"])
_HEADER = re.compile(r"^(\s*)(if|elif|else|for|while|with|try|except|finally)\b.*:\s*$")
_COMPOUND = re.compile(r"\s*(if|elif|else|for|while|with|try|except|finally|def|class|async|match|case)\b|\s*@")


def one_line(source: str) -> tuple[str, dict[int, int]] | None:
    """``source`` with each body of one to three simple one-line statements joined onto its header's
    line (``if c:`` / ``    a()`` / ``    b()`` -> ``if c: a(); b()``), and where each joined line went;
    None when nothing was joined. The result has the same ``ast`` as ``source``."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    starts, comments, continued = set(), set(), set()
    first = None
    for token in tokens:
        if token.type == tokenize.COMMENT:
            comments.add(token.start[0])
        if token.type == tokenize.NEWLINE:
            if first is not None and token.start[0] != first:
                continued.update(range(first, token.start[0] + 1))
            first = None
        elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT) and first is None:
            first = token.start[0]
            starts.add(first)
    lines = source.split("\n")
    out, moved = list(lines), {}

    def single(n: int) -> bool:  # line n (1-based) is one whole statement with no comment
        return n in starts and n not in continued and n not in comments

    i = 0
    while i < len(lines):
        header = _HEADER.match(lines[i])
        if header is None or not single(i + 1):
            i += 1
            continue
        indent = len(header.group(1))
        body, j = [], i + 1
        while j < len(lines) and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) > indent:
            if not single(j + 1) or _COMPOUND.match(lines[j]):
                body = []
                break
            body.append(j)
            j += 1
        after = j
        while after < len(lines) and (not lines[after].strip() or lines[after].lstrip().startswith("#")):
            after += 1  # blank lines and comments do not end a block
        ends = after >= len(lines) or len(lines[after]) - len(lines[after].lstrip()) <= indent
        if not body or len(body) > 3 or not ends:
            i += 1
            continue
        out[i] = lines[i].rstrip() + " " + "; ".join(lines[k].strip() for k in body)
        for k in body:
            out[k] = ""
            moved[k + 1] = i + 1
        i = j
    if not moved:
        return None
    joined = "\n".join(out)
    assert ast.dump(ast.parse(joined)) == ast.dump(ast.parse(source)), "the rewrite changed the code"
    return joined, moved


def _findings(source: str, name: str, moved: dict[int, int] | None = None) -> list[tuple[str, int, str]]:
    moved = moved or {}
    return sorted((f.code, moved.get(f.line, f.line), f.message) for f in check_text(source, name, EVERY))


FIXTURES = sorted([*(ROOT / "rules" / "fixtures").glob("*/*.py"), *(ROOT / "tests" / "fixtures" / "must_not_flag").glob("*.py"),
                   *(ROOT / "examples").glob("*.py")])


def test_every_fixture_reports_the_same_with_its_bodies_on_one_line() -> None:
    rewritten, differ = 0, []
    for path in FIXTURES:
        source = path.read_text(encoding="utf-8")
        done = one_line(source)
        if done is None:
            continue
        rewritten += 1
        joined, moved = done
        indented, on_one_line = _findings(source, str(path), moved), _findings(joined, str(path))
        if indented != on_one_line:
            differ.append(f"{path.relative_to(ROOT)}: indented {indented} / one line {on_one_line}")
    assert rewritten > 200  # the rewrite reaches most fixtures (not a test that passes by doing nothing)
    assert not differ, "\n".join(differ)


def _pair(indented: str, code: str) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    indented = textwrap.dedent(indented)
    done = one_line(indented)
    assert done is not None
    joined, moved = done
    return [f[:2] for f in _findings(indented, "a.py", moved) if f[0] == code], \
        [f[:2] for f in _findings(joined, "a.py") if f[0] == code]


_ACCUMULATION = """\
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())


    def train(loader, accum, use_amp):
        optimizer.zero_grad()
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y) / accum
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (i + 1) % accum == 0:
                if use_amp:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad()
"""


def test_steps_of_one_line_amp_branches_close_the_window() -> None:
    # the last window of each epoch is never stepped, then wiped by the zero_grad of the next epoch
    indented, joined = _pair(_ACCUMULATION, "LC105")
    assert indented == joined == [("LC105", 17)]
    fixed = _ACCUMULATION.replace("if (i + 1) % accum == 0:", "if (i + 1) % accum == 0 or i + 1 == len(loader):")
    assert _pair(fixed, "LC105") == ([], [])


def test_zero_grad_beside_the_step_on_one_line() -> None:
    every_batch = _ACCUMULATION.replace("""            if (i + 1) % accum == 0:
                if use_amp:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad()
""", """            if (i + 1) % accum == 0 or i + 1 == len(loader):
                optimizer.step()
            optimizer.zero_grad()
""")
    indented, joined = _pair(every_batch, "LC101")
    assert indented == joined == [("LC101", 19)]
    beside = every_batch.replace("""                optimizer.step()
            optimizer.zero_grad()
""", """                optimizer.step()
                optimizer.zero_grad()
""")
    for code in ("LC101", "LC103", "LC104"):
        assert _pair(beside, code) == ([], [])


_MODES = """\
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters())


    def set_mode(mode, models):
        for m in models:
            if mode == "train":
                m.train()
            if mode == "eval":
                m.eval()


    def check_accuracy(loader):
        set_mode("eval", [model])
        with torch.no_grad():
            for x, y in loader:
                model(x)
        set_mode("eval", [model])


    def train(loader, val_loader, checkpoint_every):
        set_mode("train", [model])
        for t, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            if t % checkpoint_every == 0:
                check_accuracy(val_loader)
"""


def test_mode_switches_in_one_line_bodies() -> None:
    # clevr-iep's check_accuracy() ended with set_mode('eval', ...) where 'train' was meant
    indented, joined = _pair(_MODES, "LC605")
    assert indented == joined == [("LC605", 12)]
    # the helper's `m` is no name of the loop: no fix puts `m.train()` there
    leak, = check_text(textwrap.dedent(_MODES), "a.py", frozenset({"LC605"}))
    assert not leak.fixable
    restored = _MODES.replace('        set_mode("eval", [model])\n\n\n', '        set_mode("train", [model])\n\n\n')
    assert _pair(restored, "LC605") == ([], [])


def test_a_module_frozen_by_a_one_line_loop_is_not_trained() -> None:
    frozen = """\
        import torch
        from torch import nn

        backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten())
        head = nn.Sequential(nn.Dropout(0.2), nn.Linear(8 * 30 * 30, 10))
        for p in backbone.parameters():
            p.requires_grad = False
        optimizer = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)


        def train(loader, epochs):
            for epoch in range(epochs):
                head.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(head(backbone(x)), y).backward()
                    optimizer.step()
                backbone.eval()
                head.eval()
        """
    assert _pair(frozen, "LC605") == ([], [])
    trained = frozen.replace("        for p in backbone.parameters():\n            p.requires_grad = False\n", "")
    assert _pair(trained, "LC605") == ([("LC605", 16)], [("LC605", 16)])


_SKIPPED = """\
    import torch
    from torch import nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def train(loader, accum, skip, max_steps):
        for i, (x, y) in enumerate(loader):
            SKIP
            loss = nn.functional.mse_loss(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize(("skip", "flagged"), [
    ("if i < skip:\n                continue", True),  # a resume skip: each pass still ends on its last batch
    ("if skip > 0:\n                skip -= 1\n                continue", True),
    ("if i >= max_steps:\n                break", False),  # a stop: the last window may be whole
])
def test_a_one_line_exit_at_the_loop_top(skip: str, flagged: bool) -> None:
    indented, joined = _pair(_SKIPPED.replace("SKIP", skip), "LC105")
    assert indented == joined
    assert bool(joined) == flagged
