"""Names a file takes from its project's own modules with ``from module import *``.

``from utils import *`` then ``scheduler = get_scheduler(optimizer, ...)``: ``get_scheduler`` is the
top-level function of the project's ``utils.py``, as with ``from utils import get_scheduler``. Read
from the texts (no parse): only the names the file calls and does not define itself, only the
top-level ``def``/``class`` of the module, none starting with ``_`` unless the module's literal
``__all__`` lists it (a module whose ``__all__`` is not a literal gives none). Modules the star-imported
module itself star-imports are not followed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern
from loopcheck.project.walk import parsed

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

_TOP = Pattern(rb"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)
_CALLED = Pattern(rb"(\w+)[ \t]*\(")
_ALL = Pattern(rb"^__all__\b", re.M)


def star_imported(index: ProjectIndex, path: Path, stars: tuple[tuple[str, int], ...]) -> dict[str, tuple[str, str, int]]:
    """``{name: (module, name, level)}`` for each name the file at ``path`` calls that a project module
    it star-imports (``stars``: (module, level) of each ``from module import *``) defines at its top
    level; later star imports bind over earlier ones."""
    found: dict[str, tuple[str, str, int]] = {}
    targets = [(module, level, target) for module, level in stars
               if (module or level) and (target := index.resolve(path, module, level)) is not None]
    if not targets:
        return found  # `from torch.nn import *`: no module of the project
    text = index.text_of(path)
    wanted = set(_CALLED.findall(text)) - set(_TOP.findall(text))
    for module, level, target in targets:
        body = index.text_of(target)
        exported = _exported(body)
        for name in set(_TOP.findall(body)) & wanted:
            local = name.decode("ascii", "replace")
            if local.startswith("_") if exported is None else local not in exported:
                continue
            found[local] = (module, local, level)
    return found


def _exported(body: bytes) -> frozenset[str] | None:
    """The module's ``__all__`` where it sets one (empty where it is not a literal list or tuple of
    strings); None where it sets none."""
    if _ALL.search(body) is None:
        return None
    tree = parsed(body)
    if tree is None:
        return frozenset()
    names: frozenset[str] = frozenset()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                return frozenset()
            names = frozenset(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else frozenset()
    return names
