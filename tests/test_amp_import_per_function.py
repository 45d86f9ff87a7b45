"""`from torch.cuda.amp import autocast` in each of two test methods: rewriting one import and every
call of the name would hand "cuda" to the old class the other import still binds, so LC206 offers
no fix there; with the one import, the import and its calls are rewritten together."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_source
from loopcheck.fixer import fix_text

TESTS = textwrap.dedent("""\
    import torch


    class RCNNTest:
        def test_autocast(self):
            from torch.cuda.amp import autocast

            with autocast():
                out = self.model(torch.rand(3, 100, 100))
            assert out.dtype == torch.float16


    class RetinaNetTest:
        def test_autocast(self):
            from torch.cuda.amp import autocast

            with autocast():
                out = self.model(torch.rand(3, 100, 100))
            assert out.dtype == torch.float16
""")


def test_two_imports_of_the_name_get_no_fix() -> None:
    assert [f.code for f in check_source(TESTS, select=["LC206"])] == ["LC206", "LC206"]
    assert fix_text(TESTS, "t.py", frozenset({"LC206"})).source == TESTS


def test_one_import_of_the_name_is_rewritten_with_its_calls() -> None:
    one = TESTS[:TESTS.index("class RetinaNetTest")].rstrip() + "\n"
    fixed = fix_text(one, "t.py", frozenset({"LC206"})).source
    assert "from torch.amp import autocast" in fixed and 'with autocast("cuda"):' in fixed
    assert "torch.cuda.amp" not in fixed
