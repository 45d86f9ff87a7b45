"""Random valid Python programs (hypothesmith) for the property tests of tests/test_from_ast.py and
tests/test_fuzz.py.

hypothesmith builds a parser of Python's grammar for its strategy, which takes seconds: it is built
when a test first draws a program, once per process, not when the suite is collected (every pytest
worker collects every module)."""
from __future__ import annotations

import functools

from hypothesis import strategies as st


@functools.lru_cache(maxsize=None)
def _from_grammar() -> st.SearchStrategy[str]:
    import hypothesmith

    return hypothesmith.from_grammar()


PROGRAMS: st.SearchStrategy[str] = st.deferred(lambda: _from_grammar())
