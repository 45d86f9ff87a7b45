"""The shape of a rule: a code, a one-line message, documentation, examples and one ``check``.

A rule never walks the syntax tree itself: it reads the ``FileModel`` built once per file and
yields a ``Violation`` per problem. ``VALID`` examples must produce no finding of the rule;
each line of an ``INVALID`` example that ends in ``# LCxxx`` must be flagged, and only those.
Both lists are executed as tests and rendered into the rule's catalogue page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from loopcheck.catalog import CODES, Code
from loopcheck.config import Options
from loopcheck.fixes import Fix
from loopcheck.model import Event, FileModel
from loopcheck.screen import TRAINING_LOOP_TEXT


@dataclass(frozen=True)
class Violation:
    node: cst.CSTNode  # what the finding points at
    stmt: cst.CSTNode  # the statement holding it: a suppression comment may sit on its first line
    message: str | None = None  # replaces the rule's message when it can say more
    fix: Fix | None = None
    # whether what it reports needs the loop to accumulate (N > 1): then the message names the setting
    # N is, and a setting the project leaves inert drops it (a clip after the step is wrong at N = 1 too)
    needs_accumulation: bool = True


class Rule:
    code: ClassVar[str]
    message: ClassVar[str]
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []
    # Text a file must contain for the rule to have anything to look at (checked before parsing).
    requires: ClassVar[tuple[str, ...]] = TRAINING_LOOP_TEXT
    # ...and all of these (e.g. "BatchNorm" for a rule that also needs a training loop).
    requires_all: ClassVar[tuple[str, ...]] = ()
    # Whether the rule reads training loops: then it runs only on files with a training loop's text
    # whose `ast` shows a loop that back-propagates (loopcheck.screen). False for a rule that reads
    # the whole file (imports, calls) and can find something in a file without one.
    needs_training_loop: ClassVar[bool] = True
    # Texts that let such a rule run on a file without a training loop: a framework hook it reads on
    # its own (Lightning's `optimizer_step` override); the file must still hold one of them.
    without_training_loop: ClassVar[tuple[str, ...]] = ()
    # For a rule that reads only the top-level statements mentioning one of these words (and the
    # imports, and the names they bind to such things): where it runs alone, libcst parses only
    # those statements (loopcheck.excerpt). Empty: the rule reads the whole file.
    reads_statements_with: ClassVar[tuple[str, ...]] = ()
    # Whether the rule reads the project's dependency pins (``model.project.pins``) in any file it
    # runs on, also one without a training loop: the project is loaded for it there.
    reads_pins: ClassVar[bool] = False
    # Whether the rule offers fixes (where it is certain enough); documented and tested per rule.
    fixable: ClassVar[bool] = False
    # The `[tool.loopcheck]` settings the VALID/INVALID examples are checked with.
    EXAMPLE_OPTIONS: ClassVar[Options] = Options()

    @classmethod
    def info(cls) -> Code:
        return CODES[cls.code]

    @classmethod
    def name(cls) -> str:
        return CODES[cls.code].name

    def check(self, model: FileModel) -> Iterable[Violation]:
        raise NotImplementedError

    def at(self, event: Event, message: str | None = None, fix: Fix | None = None,
           needs_accumulation: bool = True) -> Violation:
        return Violation(event.node, event.stmt, message, fix, needs_accumulation)
