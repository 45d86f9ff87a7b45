"""Optimizer steps that only create the optimizer's state.

A helper that broadcasts or loads an optimizer's state first makes sure the state exists: under a
test that it is still empty (``if len(optimizer.state_dict()["state"]) == 0:``, ``if not
optimizer.state:``) it sets every gradient to zeros and steps once (horovod's
``broadcast_optimizer_state``). That step trains nothing and never runs on an optimizer that has
stepped already: it is no step of a training loop.
"""

from __future__ import annotations

from loopcheck.patterns import Pattern

# `optimizer.state`, `self.optimizer.state`, `state_dict["state"]`, `optimizer.state_dict()["state"]`: the
# state of something named as an optimizer or read from a state dict (not `args.state`)
_STATE = r"""(?=[\w.]*(?:[Oo]pt|state_dict))[\w.]+(?:\(\))?(?:\.state|\[\s*['"]state['"]\s*\])"""
_EMPTY = Pattern(rf"""^(?:len\(\s*{_STATE}\s*\)\s*(?:==\s*0|<\s*1|<=\s*0)|not\s+(?:len\(\s*{_STATE}\s*\)|{_STATE})"""
                 rf"""|{_STATE}\s*==\s*\{{\s*\}})$""")


def empty_state_test(text: str) -> bool:
    """``text`` (an ``if`` test) holds only while the optimizer's state is empty."""
    return bool(_EMPTY.match(" ".join(text.split())))
