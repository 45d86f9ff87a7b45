"""Methods of the file's own classes that put their object (or part of it) in train mode.

``discriminator.train_custom()`` where the file's ``Discriminator.train_custom`` freezes the encoder
and calls ``self.classifier_head.train()``: the call is a ``classifier_head.train()`` of the object it
is called on, a deliberate partial train mode, as a ``model.train()`` written in the loop would be.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.syntax import dotted, walk


def train_mode_targets(definitions: list[cst.FunctionDef]) -> tuple[str, ...] | None:
    """The parts of ``self`` that every definition of one method puts in train mode (``""`` for
    ``self.train()``, ``"classifier_head"`` for ``self.classifier_head.train()``); None where one of
    them puts nothing in train mode, or may put something in eval mode (``.eval()``,
    ``.train(False)``, ``.train(mode)``)."""
    found: set[str] = set()
    for fn in definitions:
        params = fn.params.params
        if not params or params[0].name.value != "self" or fn.decorators:
            return None
        mine: set[str] = set()
        for node in walk(fn.body):
            if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                continue
            called = node.func.attr.value
            if called == "eval":
                return None
            if called != "train":
                continue
            if node.args:
                return None
            target = dotted(node.func.value)
            if target is None or target != "self" and not target.startswith("self."):
                return None
            mine.add(target[5:])
        if not mine:
            return None
        found |= mine
    return tuple(sorted(found))
