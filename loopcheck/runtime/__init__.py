"""loopcheck's runtime checker: the same LC codes as the static checker, from what a
training run actually does.

Two entry points, both installing every hook before the training code runs and removing
all of them afterwards:

* ``loopcheck run [OPTIONS] SCRIPT [ARGS...]`` / ``loopcheck run -m MODULE [ARGS...]``
  (``loopcheck.runtime.command``), which runs the script like ``python SCRIPT ARGS``;
* ``loopcheck.runtime.watch(...)``, a context manager and decorator for notebooks::

      with loopcheck.runtime.watch(report="report.json"):
          train()

Importing this package imports neither torch nor libcst: torch is imported when a session
starts. What is observed and how is described in ``REPORT.md`` next to this file, together
with the JSON report's schema.
"""
from __future__ import annotations

from .watch import watch

__all__ = ["watch"]
