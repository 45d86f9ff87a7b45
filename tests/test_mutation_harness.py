"""benchmarks/mutation: a mutant is found only when its own code appears on a new line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOOP = """\
import torch

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 2), torch.randn(4, 1))] * 3
for x, y in loader:
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
"""
OPERATORS = """\
from benchmarks.mutation import edit
from benchmarks.mutation.run import Mutant


def no_zero_grad(source, tree):
    for stmt in edit.expression_statements(tree, "zero_grad"):
        yield Mutant("LC103", stmt.lineno, "zero_grad removed", edit.without(source, stmt))


def renamed_loss(source, tree):
    yield Mutant("LC103", 8, "loss renamed (harmless)", source.replace("loss", "cost"))


OPERATORS = [no_zero_grad, renamed_loss]
"""


@pytest.fixture
def run(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "toy_ops.py").write_text(OPERATORS)
    from benchmarks.mutation import run

    return run


def test_a_mutant_is_found_only_where_its_code_is_newly_reported(run, tmp_path, capsys):
    repo = tmp_path / "corpus" / "repo"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(LOOP)
    out = tmp_path / "out.json"
    details = tmp_path / "misses.md"
    assert run.main(["--ops", "toy_ops", "--corpus", str(tmp_path / "corpus"), "--jobs", "1",
                     "--json", str(out), "--details", str(details)]) == 0
    results = {r["what"]: r for r in json.loads(out.read_text())}
    assert results["zero_grad removed"]["found"] is True
    assert results["zero_grad removed"]["line"] == 7
    assert results["loss renamed (harmless)"]["found"] is False
    assert "toy_ops.renamed_loss LC103" in details.read_text()
    assert "zero_grad removed" not in details.read_text()
    assert "| all | | 2 | 1 | 1 | 0.50 | |" in capsys.readouterr().out


def test_an_edit_keeps_the_line_count(run):
    from benchmarks.mutation import edit

    import ast

    tree = ast.parse(LOOP)
    stmt = next(edit.expression_statements(tree, "zero_grad"))
    assert edit.without(LOOP, stmt).splitlines()[6] == "    pass"
    assert edit.without(LOOP, stmt).count("\n") == LOOP.count("\n")
    with pytest.raises(ValueError):
        edit.replaced(LOOP, 7, 7, ["a", "b"])


def test_only_files_that_back_propagate_and_step_are_read(run, tmp_path):
    (tmp_path / "c" / "r").mkdir(parents=True)
    (tmp_path / "c" / "r" / "train.py").write_text(LOOP)
    (tmp_path / "c" / "r" / "model.py").write_text("import torch\n")
    assert [p.name for _, p in run.training_files([tmp_path / "c"])] == ["train.py"]
    assert sys.modules["benchmarks.mutation.run"] is run


RENAMED = """\
import torch

lr = 0.1


def train(model, loader, epochs=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            optimizer.step()
    print(f"{loss}")
    return optimizer


for step in range(3):
    total = step * 2
"""


def test_renaming_keeps_parameters_and_meaning(run):
    import ast

    from benchmarks.mutation import renamed

    tree = ast.parse(RENAMED)
    train = tree.body[2]
    # parameters stay (a caller may pass them by keyword); names in an f-string give up before 3.12
    assert renamed.bound_names(train) == ["optimizer", "epoch", "x", "y", "loss"]
    assert renamed.renamed(RENAMED, train) is None
    # a module's own names, but not those its functions read (`lr`)
    assert renamed.bound_names(tree) == ["step", "total"]
    text = renamed.renamed(RENAMED, tree)
    assert "for v0 in range(3):\n    v1 = v0 * 2\n" in text and "lr=lr" in text
    no_fstring = RENAMED.replace('    print(f"{loss}")\n', "    print(loss)\n")
    text = renamed.renamed(no_fstring, ast.parse(no_fstring).body[2])
    assert "v0 = torch.optim.SGD(model.parameters(), lr=lr)" in text
    assert "for v2, v3 in loader:" in text and "v4.backward()" in text and "return v0" in text
    assert text.count("\n") == no_fstring.count("\n")


BY_NAME = """\
import torch


def train(model, loader, build):
    optimizer = build(model)
    for x, y in loader:
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()


def report(model, loader, build):
    opt = build(model)
    for x, y in loader:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        print(f"{loss}")
"""


def test_rename_checks_both_files_with_the_scopes_names_renamed(run, tmp_path):
    # `optimizer = build(model)`: only its name says it is an optimizer, so renamed (`v0 = build(model)`)
    # the missing zero_grad is no longer seen; the second loop's scope names `loss` in an f-string,
    # which cannot be renamed reliably, so its mutant is left out.
    repo = tmp_path / "corpus" / "repo"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(BY_NAME)
    found = {}
    for flag in ([], ["--rename"]):
        out = tmp_path / "out.json"
        assert run.main(["--ops", "toy_ops", "--corpus", str(tmp_path / "corpus"), "--jobs", "1",
                         "--json", str(out), *flag]) == 0
        found[bool(flag)] = {(r["line"], r["found"]) for r in json.loads(out.read_text())
                             if r["what"] == "zero_grad removed"}
    assert found[False] == {(7, True), (16, True)}
    assert found[True] == {(7, False)}


def test_a_mutant_and_its_file_get_the_same_names(run):
    import ast

    from benchmarks.mutation import renamed

    source = "def f(a):\n    b = a\n    return b\n"
    mutated = "def f(a):\n    c = a; b = c\n    return b\n"
    pair = renamed.renamed_pair(source, ast.parse(source), mutated, 2)
    assert pair == ("def f(a):\n    v0 = a\n    return v0\n", "def f(a):\n    v1 = a; v0 = v1\n    return v0\n")
