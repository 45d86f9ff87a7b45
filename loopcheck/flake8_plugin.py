"""loopcheck as a flake8 plugin: the LC codes in existing flake8 setups and the editors that run it.

Registered as ``[project.entry-points."flake8.extension"] LC = "loopcheck.flake8_plugin:Plugin"``.
flake8 hands every file to ``Plugin`` (a tree plugin: it asks for ``tree``, but loopcheck checks the
file's text with its own engine, so results are the same as ``loopcheck check``'s); the default
rules run, plus any listed in ``--loopcheck-extend-select`` (opt-in rules such as LC110).
flake8's own ``--select``/``--ignore``/``# noqa`` then apply as for any plugin. Columns are 0-based,
as flake8 expects (it adds 1 when printing).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from loopcheck import __version__


class Plugin:
    name = "loopcheck"
    version = __version__
    extend_select: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str = "<stdin>") -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager: Any) -> None:
        manager.add_option("--loopcheck-extend-select", default="", parse_from_config=True, comma_separated_list=True,
                           help="loopcheck rules to run on top of the default ones (e.g. opt-in LC110)")

    @classmethod
    def parse_options(cls, options: Any) -> None:
        from loopcheck.selection import expand

        selectors = tuple(getattr(options, "loopcheck_extend_select", None) or ())
        for selector in selectors:
            expand(selector)  # an unknown rule stops flake8 with loopcheck's message, not silently
        cls.extend_select = selectors

    def run(self) -> Iterator[tuple[int, int, str, type[Plugin]]]:
        from loopcheck.engine import LazyProject, check_text
        from loopcheck.selection import resolve

        source = "".join(self.lines)
        # the facts of the modules the file imports, as `loopcheck check` reads them (a helper that zeroes)
        project = LazyProject(self.filename) if os.path.isfile(self.filename) else None
        for finding in check_text(source, self.filename, resolve(None, (), self.extend_select), project=project):
            yield finding.line, max(0, finding.col - 1), f"{finding.code} {finding.message}", type(self)
