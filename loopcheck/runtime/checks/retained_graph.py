"""Losses kept alive with their graph (``total += loss``, ``losses.append(loss)``): a token
in the loss's ``grad_fn.metadata`` lives exactly as long as the graph node, so a weak
reference to it tells, without touching any tensor, whether something still holds the graph.

One loss per optimizer window is watched. A closure that ``optimizer.step(closure)`` evaluates
several times (LBFGS) gets a few more: the first evaluation's loss is what the step returns
(LBFGS holds it for the step, the loop may keep it), a later one is dropped by the optimizer
once read, so later evaluations still alive a whole step after theirs are kept by the user."""
from __future__ import annotations

import sys
import weakref
from collections import deque
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..hooks.loss_scale import SCALER_MARK
from ..source import accumulating_line

if TYPE_CHECKING:
    from ..session import Session

TOKEN_KEY = "loopcheck.graph_token"
KEEP = 16  # tokens watched at a time
MIN_AGE = 2  # steps a loss may legitimately outlive its backward (the loop variable)
MIN_ALIVE = 3
EVALUATIONS = MIN_ALIVE  # later closure evaluations watched per window


class _Token:
    __slots__ = ("__weakref__",)


class RetainedGraphs:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.tokens: deque[tuple[weakref.ref[Any], int, Site | None]] = deque(maxlen=KEEP)
        self.reported = False
        self.holder: Site | None = None  # the line that keeps the graphs, once found
        self.window = -1
        self.evaluations: deque[tuple[weakref.ref[Any], int, Site | None]] = deque(maxlen=KEEP)
        self.evaluation_window, self.evaluations_watched = -1, 0

    def watch(self, loss: Any, site: Site | None, scaled: bool = False) -> None:
        """One loss per optimizer window is enough to see graphs pile up. The token goes on the
        node of the loss the user holds: under ``scaler.scale(loss).backward()`` the root is the
        scaler's multiplication, which nothing keeps once backward returns, while a kept ``loss``
        keeps the node below it."""
        node = getattr(loss, "grad_fn", None)
        if node is None or self.window == self.session.windows_closed:
            return
        if scaled and node.metadata.get(SCALER_MARK):
            below = node.next_functions[0][0]
            if below is None or type(below).__name__ == "AccumulateGrad":
                return  # a scaled leaf: no graph to keep
            node = below
        self.window = self.session.windows_closed
        token = _Token()
        node.metadata[TOKEN_KEY] = token
        self.tokens.append((weakref.ref(token), self.session.step_index(), site))

    def watch_evaluation(self, loss: Any, site: Site | None) -> None:
        """A later evaluation of a step's closure (the window's first loss is already watched)."""
        window = self.session.windows_closed
        if window != self.evaluation_window:
            self.evaluation_window, self.evaluations_watched = window, 0
        node = getattr(loss, "grad_fn", None)
        if node is None or self.evaluations_watched >= EVALUATIONS or self.reported:
            return
        self.evaluations_watched += 1
        token = _Token()
        node.metadata[TOKEN_KEY] = token
        self.evaluations.append((weakref.ref(token), self.session.step_index(), site))

    def on_closure_step(self) -> None:
        """A step closed while later closure evaluations are watched."""
        if self.reported:
            self.evaluations.clear()
            return
        now = self.session.step_index()
        alive = [(ref, site) for ref, step, site in self.evaluations if step <= now - MIN_AGE and ref() is not None]
        if len(alive) < MIN_ALIVE:
            return
        self.reported = True
        holder = self.session.guard.call("retained-graph holder", holder_site, alive[0][0](), sys._getframe(1))
        self.session.report("LC601", f"losses of {len(alive)} closure evaluations of earlier steps "
                            "are still referenced with their autograd graph (stored without "
                            ".item()/.detach()): memory grows every step", holder or alive[0][1])
        self.holder = holder

    def alive_old(self) -> list[tuple[int, Site | None]]:
        now = self.session.step_index()
        return [(step, site) for ref, step, site in self.tokens
                if step <= now - MIN_AGE and ref() is not None]

    def oldest_site(self) -> Site | None:
        alive = self.alive_old()
        return self.holder or (alive[0][1] if alive else None)

    def on_step(self) -> None:
        if self.reported:
            return
        alive = self.alive_old()
        if len({step for step, _ in alive}) >= MIN_ALIVE:
            self.reported = True
            token = next(ref() for ref, step, _ in self.tokens if ref() is not None)
            holder = self.session.guard.call("retained-graph holder", holder_site, token, sys._getframe(1))
            self.session.report("LC601", f"losses of {len(alive)} earlier steps are still "
                                "referenced with their autograd graph (accumulated or stored "
                                "without .item()/.detach()): memory grows every step",
                                holder or alive[0][1])
            self.holder = holder


_MAX_NODES = 5000  # graph nodes walked per candidate (once, when LC601 is reported)
_MAX_ITEMS = 64  # elements of a list or dict looked at
_USER_FRAMES = 4


def holder_site(token: _Token, frame: FrameType | None) -> Site | None:
    """The line that keeps the graph: find the user variable (a local, a global or an attribute
    of ``self`` in the first user frames) whose tensor's graph reaches the token, then the
    statement of that function that accumulates into it (``total += loss``, ``losses.append``).
    Runs once; reads graph nodes and source, never tensor values."""
    frames = 0
    while frame is not None and frames < _USER_FRAMES:
        if user_site(frame) is not None and user_site(frame).file == frame.f_code.co_filename \
                and user_site(frame).line == frame.f_lineno:
            frames += 1
            here = Site(frame.f_code.co_filename, frame.f_lineno)
            for name in _holders(token, frame):
                line = accumulating_line(here, name, frame.f_code.co_firstlineno)
                if line is not None:
                    return line
        frame = frame.f_back
    return None


def _holders(token: _Token, frame: FrameType) -> list[str]:
    names = [name for name, value in list(frame.f_locals.items()) if _reaches(value, token)]
    owner = frame.f_locals.get("self")
    if owner is not None and hasattr(owner, "__dict__"):
        names += [f"self.{name}" for name, value in list(vars(owner).items()) if _reaches(value, token)]
    if frame.f_globals is not frame.f_locals:
        names += [name for name, value in list(frame.f_globals.items()) if _reaches(value, token)]
    return names


def _reaches(value: Any, token: _Token) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_reaches(item, token) for item in value[-_MAX_ITEMS:])
    if isinstance(value, dict):
        return any(_reaches(item, token) for item in list(value.values())[-_MAX_ITEMS:])
    node = getattr(value, "grad_fn", None) if type(value).__module__.startswith("torch") else None
    seen, queue = set(), [node] if node is not None else []
    while queue and len(seen) < _MAX_NODES:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.metadata.get(TOKEN_KEY) is token:
            return True
        queue.extend(next_node for next_node, _ in node.next_functions)
    return False
