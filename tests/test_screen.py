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
from loopcheck.screen import Verdict, has_training_loop, may_train_with, screen

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
    ("for b in loader:\n    manual_backward(loss)\n", Verdict.TRAINING_LOOP),
    # names that only end in `backward` are other calls
    ("for b in loader:\n    net.my_backward(loss)\n    xmanual_backward(loss)\n", Verdict.NO_TRAINING_LOOP),
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
    monkeypatch.setattr(loopcheck.project, "for_file", lambda path, cache=None, tree=None:
                        read.append(Path(path).name) or real(path, cache, tree))
    (project / "helpers.py").write_text("def run(loss):\n    loss.backward()\n")
    files = {
        "untrained.py": "import torch\nfor p in params:\n    p.grad = None\nprint('no backward() here')\n",
        # LC206 reads the project's pins (a torch pinned below 2.4 has nothing deprecated), so it is read
        "amp_only.py": "import torch\nscaler = torch.cuda.amp.GradScaler()\nfor p in params:\n    p.grad = None\n",
        "imports_helper.py": "from helpers import run\nx = torch.cuda.amp.autocast()\nfor b in loader:\n    run(b)\n",
        "trains.py": "for b in loader:\n    model(b).sum().backward()\n    opt.step()\n",
    }
    for name, source in files.items():
        (project / name).write_text(source)
        check_text(source, name, resolve(), project=LazyProject(str(project / name)))
    # no loop that trains, no project import, no rule that reads the pins: not read
    assert read == ["amp_only.py", "imports_helper.py", "trains.py"]


def test_a_cached_file_that_used_no_project_facts_does_not_read_them(project: Path, run_cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck import checker

    (project / "untrained.py").write_text("import torch\nfor p in params:\n    p.grad = None\nprint('backward()')\n")
    first = run_cli("check")
    assert first[0] == 0 and "1 file checked" in first[1]

    def fail(*args: object) -> None:
        raise AssertionError("project facts read for a file whose result did not use them")

    monkeypatch.setattr(checker, "_project_digest", fail)
    monkeypatch.setattr(checker, "_check_job", fail)  # and the file is not checked again
    assert run_cli("check") == first


def test_a_cached_deprecated_amp_result_follows_the_pins(project: Path, run_cli,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # LC206 read the project's pins: its cached result is reused while their digest holds
    from loopcheck import checker

    (project / "amp.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    first = run_cli("check")
    assert first[0] == 1 and "LC206" in first[1]

    def fail(*args: object) -> None:
        raise AssertionError("a cached result whose project digest holds was checked again")

    monkeypatch.setattr(checker, "_check_job", fail)
    assert run_cli("check") == first


@pytest.mark.parametrize(("source", "names", "may"), [
    ("from helpers import update\nfor b in loader:\n    update(b)\n", {"update", "other"}, True),
    ("from helpers import update\nfor b in loader:\n    evaluate(b)\nupdate(b)\n", {"update"}, False),  # not in a loop
    ("for b in loader:\n    trainer.optimize(b)\n", {"optimize"}, True),
    ("for b in loader:\n    self.my_train_step(b)\n", {"train_step"}, True),  # the screen's patterns: no word start
    ("def my_train_step(b):\n    pass\n\nfor b in loader:\n    my_train_step(b)\n", {"train_step", "my_train_step"},
     True),
    ("def fit(b):\n    step(b)\n\nfor b in loader:\n    fit(b)\n", {"step"}, True),  # through a function of the file
    ("class T:\n    def opt(self, loss):\n        self.n += 1\n        wrapper(loss)\n"
     "        if self.n % 4 == 0:\n            self.o.step()\n", {"wrapper"}, True),  # a step function
    ("for b in loader:\n    update(b)\n", set(), False),
])
def test_may_train_with_never_misses_a_rescreen(source: str, names: set[str], may: bool) -> None:
    # the engine rescreens with imported back-propagating names only where this says it can matter
    tree = screen(source).tree
    assert tree is not None and screen(source).verdict is Verdict.NO_TRAINING_LOOP
    assert may_train_with(tree, source, names) is may
    for subset in ({n} for n in names):
        assert not has_training_loop(tree, source, subset) or may_train_with(tree, source, names)


def test_backward_names_are_parsed_only_where_a_loop_may_call_one(project: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck.engine import LazyProject, check_text
    from loopcheck.project import Imported, for_file
    from loopcheck.selection import resolve

    (project / "helpers.py").write_text("class Trainer:\n    def optimize(self, loss):\n        loss.backward()\n\n"
                                        "def run(loss):\n    loss.backward()\n")
    (project / "logs.py").write_text("def log(x):\n    print(x)\n")  # says nothing of backward
    asked: list[str] = []
    real = Imported.backward_names
    monkeypatch.setattr(Imported, "backward_names",
                        lambda self, among=None: asked.append(self.path.name) or real(self, among))
    files = {"logged.py": "from logs import log\nfor b in loader:\n    log(b)\n",
             "runs_once.py": "from helpers import run\nfor b in loader:\n    evaluate(b)\nrun(b)\n",
             "runs.py": "from helpers import run\nfor b in loader:\n    run(b)\n",
             "optimizes.py": "import helpers\nfor b in loader:\n    trainer.optimize(b)\n"}
    for name, source in files.items():
        source = "# a helper calls backward() for us\n" + source  # the text the rules ask for
        (project / name).write_text(source)
        check_text(source, name, resolve(), project=LazyProject(str(project / name)))
        imported = for_file(project / name)
        assert imported is not None and real(imported) <= imported.backward_name_candidates()
    assert asked == ["runs.py", "optimizes.py"]


def test_a_call_handed_the_optimizer_inside_a_loop_is_training_text() -> None:
    """The text pre-filter passes a file whose loop hands the optimizer to a call (which may
    back-propagate in another module); one that hands it on outside any loop (a factory) is not."""
    from loopcheck.screen import has_training_text

    in_loop = "for i, (x, y) in enumerate(loader):\n    engine.step(model=model, optimizer=optimizer, loss=f(x))\n"
    assert has_training_text(in_loop)
    assert has_training_text("def train():\n    while True:\n        # a comment\n\n        step(optimizer)\n")
    assert not has_training_text("def build(cfg):\n    optimizer = make(cfg)\n    return Scheduler(optimizer, cfg)\n")
    assert not has_training_text("for p in params:\n    x = 1\noptimizer.step()\nsched = Cosine(optimizer)\n")
