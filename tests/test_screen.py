"""The `ast` screen in front of libcst must never hide a training loop the model would find.

It decides which files the libcst model sees, so it must stay a superset of the model: checked
here on every piece of training code in the repository (rule examples, fixtures, runtime
scenarios, examples). A model change that recognises a new kind of backward call fails this test
until ``loopcheck.screen`` knows it too.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from loopcheck.model import build
from loopcheck.rules import RULES
from loopcheck.screen import Verdict, screen

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted({*ROOT.glob("rules/fixtures/*/*.py"), *ROOT.glob("tests/fixtures/**/*.py"),
                *ROOT.glob("runtime/**/*.py"), *ROOT.glob("examples/*.py")})
EXAMPLES = [(f"{code}-{kind}-{i}", textwrap.dedent(text)) for code, rule in sorted(RULES.items())
            for kind, texts in (("valid", rule.VALID), ("invalid", rule.INVALID)) for i, text in enumerate(texts)]


def _check(source: str) -> None:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return
    if build(module, source).training_loops:
        assert screen(source).verdict is Verdict.TRAINING_LOOP


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_screen_keeps_every_file_with_a_training_loop(path: Path) -> None:
    _check(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "source"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_screen_keeps_every_rule_example_with_a_training_loop(name: str, source: str) -> None:
    _check(source)


@pytest.mark.parametrize(("source", "verdict"), [
    ("def step(b):\n    f(b).backward()\n\nfor b in loader:\n    step(b)\n", Verdict.TRAINING_LOOP),
    ("class T:\n    def step(self, b):\n        self.loss_scaler(loss, opt)\n"
     "    def fit(self):\n        for b in loader:\n            self.step(b)\n", Verdict.TRAINING_LOOP),
    ("def a():\n    b()\n\ndef b():\n    x.backward()\n\nwhile True:\n    a()\n", Verdict.TRAINING_LOOP),
    ("def closure():\n    loss.backward()\n    return loss\n\nfor b in loader:\n    opt.step(closure)\n",
     Verdict.TRAINING_LOOP),
    ("for b in loader:\n    torch.autograd.backward(loss)\n", Verdict.TRAINING_LOOP),
    # a name bound to a partial of a function that back-propagates (lucidrains/stylegan2-pytorch)
    ("from functools import partial\ndef loss_backwards(fp16, loss, opt):\n    loss.backward()\n\n"
     "class T:\n    def train(self):\n        backwards = partial(loss_backwards, self.fp16)\n"
     "        for b in loader:\n            backwards(loss, opt)\n", Verdict.TRAINING_LOOP),
    ("import functools\ndef run(loss):\n    loss.backward()\n\n"
     "class T:\n    def __init__(self):\n        self.bw = functools.partial(\n            run)\n"
     "    def fit(self):\n        for b in loader:\n            self.bw(b)\n", Verdict.TRAINING_LOOP),
    # a partial of a function that does not back-propagate
    ("from functools import partial\ndef loss_backwards(loss):\n    loss.backward()\n\n"
     "def fit():\n    clamp = partial(min, 1)\n    for b in loader:\n        clamp(b)\n",
     Verdict.NO_TRAINING_LOOP),
    # an autograd Function defines backward; nothing calls it in a loop
    ("class F(Function):\n    @staticmethod\n    def backward(ctx, g):\n        return g\n\n"
     "for p in params:\n    p.grad = None\n", Verdict.NO_TRAINING_LOOP),
    ("loss.backward()\nopt.step()\n", Verdict.NO_TRAINING_LOOP),  # no loop
    ("for b in loader:\n    # loss.backward() was here\n    scaler = GradScaler()\n", Verdict.NO_TRAINING_LOOP),
    ("def forward(x):\n    y.backward()\n\nfor b in loader:\n    # the forward pass\n    z = 1\n",
     Verdict.NO_TRAINING_LOOP),
    ("for b in loader\n    loss.backward()\n", Verdict.SYNTAX_ERROR),
    ("z = " + " + ".join(["1"] * 8000) + "\n", Verdict.TOO_DEEP),
])
def test_verdicts(source: str, verdict: Verdict) -> None:
    assert screen(source).verdict is verdict


def test_a_loop_calling_an_imported_backward_wrapper_is_kept(project: Path, run_cli) -> None:
    # `update` back-propagates in another module of the project (loopcheck.project's facts)
    (project / "helpers.py").write_text("def backward_and_step(loss, optimizer):\n    loss.backward()\n"
                                        "    optimizer.step()\n")
    (project / "train.py").write_text(textwrap.dedent("""\
        from helpers import backward_and_step as update


        def warmup(model, x):
            model(x).sum().backward()


        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                optimizer.zero_grad()
                update(criterion(model(x), y), optimizer)
                optimizer.step()
    """))
    code, out, _ = run_cli("check", "--no-show-source", "train.py")
    assert code == 1 and "train.py:12:9: LC109 " in out


def test_project_facts_are_read_only_where_they_can_matter(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import loopcheck.project
    from loopcheck.engine import LazyProject, check_text
    from loopcheck.selection import resolve

    read: list[str] = []
    real = loopcheck.project.for_file
    monkeypatch.setattr(loopcheck.project, "for_file", lambda path, cache=None: read.append(Path(path).name) or
                        real(path, cache))
    (project / "helpers.py").write_text("def run(loss):\n    loss.backward()\n")
    files = {
        "amp_only.py": "import torch\nscaler = torch.cuda.amp.GradScaler()\nfor p in params:\n    p.grad = None\n",
        "imports_helper.py": "from helpers import run\nx = torch.cuda.amp.autocast()\nfor b in loader:\n    run(b)\n",
        "trains.py": "for b in loader:\n    model(b).sum().backward()\n    opt.step()\n",
    }
    for name, source in files.items():
        (project / name).write_text(source)
        check_text(source, name, resolve(), project=LazyProject(str(project / name)))
    assert read == ["imports_helper.py", "trains.py"]  # no loop that trains, no project import: not read


def test_a_cached_file_that_used_no_project_facts_does_not_read_them(project: Path, run_cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck import checker

    (project / "amp.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    first = run_cli("check")
    assert first[0] == 1 and "LC206" in first[1]

    def fail(*args: object) -> None:
        raise AssertionError("project facts read for a file whose result did not use them")

    monkeypatch.setattr(checker, "_project_digest", fail)
    monkeypatch.setattr(checker, "_check_job", fail)  # and the file is not checked again
    assert run_cli("check") == first
