"""Losses kept alive with their graph (``total += loss``, ``losses.append(loss)``): a token
in the loss's ``grad_fn.metadata`` lives exactly as long as the graph node, so a weak
reference to it tells, without touching any tensor, whether something still holds the graph."""
from __future__ import annotations

import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from ..callsite import Site

if TYPE_CHECKING:
    from ..session import Session

TOKEN_KEY = "loopcheck.graph_token"
KEEP = 16  # tokens watched at a time
MIN_AGE = 2  # steps a loss may legitimately outlive its backward (the loop variable)
MIN_ALIVE = 3


class _Token:
    __slots__ = ("__weakref__",)


class RetainedGraphs:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.tokens: deque[tuple[weakref.ref[Any], int, Site | None]] = deque(maxlen=KEEP)
        self.reported = False
        self.window = -1

    def watch(self, loss: Any, site: Site | None) -> None:
        """One loss per optimizer window is enough to see graphs pile up."""
        node = getattr(loss, "grad_fn", None)
        if node is None or self.window == self.session.windows_closed:
            return
        self.window = self.session.windows_closed
        token = _Token()
        node.metadata[TOKEN_KEY] = token
        self.tokens.append((weakref.ref(token), self.session.step_index(), site))

    def alive_old(self) -> list[tuple[int, Site | None]]:
        now = self.session.step_index()
        return [(step, site) for ref, step, site in self.tokens
                if step <= now - MIN_AGE and ref() is not None]

    def oldest_site(self) -> Site | None:
        alive = self.alive_old()
        return alive[0][1] if alive else None

    def on_step(self) -> None:
        if self.reported:
            return
        alive = self.alive_old()
        if len({step for step, _ in alive}) >= MIN_ALIVE:
            self.reported = True
            self.session.report("LC601", f"losses of {len(alive)} earlier steps are still "
                                "referenced with their autograd graph (accumulated or stored "
                                "without .item()/.detach()): memory grows every step",
                                alive[0][1])
