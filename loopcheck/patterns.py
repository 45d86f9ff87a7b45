"""Regular expressions compiled on first use instead of when their module is imported.

``re`` compiles in Python: loopcheck's ~75 module-level patterns took ~48 M instructions to
compile at import, 7% of the command's own process for one script, and checking one file uses a
third of them (a run over 475 files, about three quarters). ``Pattern`` compiles its pattern the
first time a method or attribute is asked for; from then on the compiled pattern's methods are
the object's own attributes, so a call costs what it costs on a compiled pattern.
"""

from __future__ import annotations

import re
from typing import Any

# What a compiled pattern offers (besides dunders), copied onto a ``Pattern`` once it is compiled
_ATTRIBUTES = ("search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split", "scanner",
               "pattern", "flags", "groups", "groupindex")


class Pattern:
    """``re.compile(pattern, flags)``, compiled when first used."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401
        # Called only for names the object does not have: before the first use, or a name that no
        # compiled pattern has either. No private name or dunder is a pattern's (``copy`` and
        # ``pickle`` look some up, and ``_source`` is not set yet on an object they make).
        if name.startswith("_"):
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)
