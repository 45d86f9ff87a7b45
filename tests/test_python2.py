"""Training scripts written in Python 2 (``print 'loss', x``, ``except IOError, e:``): the syntax error is
reported, and the rest of the file is still checked, read with those statements as Python 3 on the
same lines. A file whose reading is still not Python 3 keeps its syntax error alone."""

from __future__ import annotations

import ast
import textwrap

from loopcheck.engine import check_text
from loopcheck.python2 import read_as_python3
from loopcheck.selection import resolve

PYTHON2 = textwrap.dedent("""\
    import torch


    def train(model, loader, optimizer, iter_size, max_iter):
        optimizer.zero_grad()
        for iter, (images, label) in enumerate(loader):
            loss = model(images, label) / iter_size
            loss.backward()
            if iter % iter_size == 0:
                optimizer.step()
                optimizer.zero_grad()
            if iter % 1000 == 0: print 'iter = ', iter, 'of', max_iter
            try:
                torch.save(model.state_dict(), 'snapshot.pth')
            except IOError, e:
                print >>sys.stderr, 'could not save', e
            if iter == max_iter:
                raise StopIteration, 'done'
        print 'time taken ', 10L
    """)


def test_the_rest_of_a_python2_script_is_checked() -> None:
    findings = check_text(PYTHON2, "train.py", resolve())
    assert sorted((f.line, f.code) for f in findings if f.code != "LC000") == [(9, "LC105"), (9, "LC106")], findings
    assert [f.code for f in findings].count("LC000") == 1
    syntax = next(f for f in findings if f.code == "LC000")
    assert "Python 2" in syntax.message
    boundary = next(f for f in findings if f.code == "LC106")
    assert boundary.source_line.strip() == "if iter % iter_size == 0:"  # the file's own line
    assert boundary.fix_message is None


def test_the_reading_keeps_every_line_in_place() -> None:
    read = read_as_python3(PYTHON2)
    assert read is not None
    ast.parse(read)
    before, after = PYTHON2.split("\n"), read.split("\n")
    assert len(before) == len(after)
    changed = [(b.strip(), a.strip()) for b, a in zip(before, after) if a != b]
    assert changed == [("if iter % 1000 == 0: print 'iter = ', iter, 'of', max_iter", "if iter % 1000 == 0: pass"),
                       ("except IOError, e:", "except IOError as e:"),
                       ("print >>sys.stderr, 'could not save', e", "pass"),
                       ("raise StopIteration, 'done'", "raise StopIteration('done')"),
                       ("print 'time taken ', 10L", "pass")]


def test_valid_python3_and_print_calls_are_not_read_again() -> None:
    assert read_as_python3("print('x')\nprint (1, 2)\nprint = log\n") is None


def test_a_statement_that_goes_on_keeps_the_syntax_error_alone() -> None:
    source = PYTHON2.replace("print 'time taken ', 10L", "print 'time taken ', \\\n        10")
    findings = check_text(source, "train.py", resolve())
    assert [f.code for f in findings] == ["LC000"]
