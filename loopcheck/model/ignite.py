"""What pytorch-ignite does with the file's process functions (read from ignite's own source,
``ignite/engine/engine.py``):

- ``Engine(process_function)`` (also ``Engine(process_function=step)``) calls
  ``process_function(engine, batch)`` once per batch of the data handed to ``engine.run(data,
  max_epochs=...)``: the function's body is the body of a batch loop that ignite writes.
- Before each call ignite adds 1 to ``engine.state.iteration``, which it never resets between
  epochs: in the function it is 1 on the first batch of a fresh run and counts on across epochs.
  ``engine.state.epoch`` counts passes, not batches.
- ``create_supervised_trainer(..., gradient_accumulation_steps=N)`` builds ignite's own update
  function (the library's, not the file's: nothing of it is modelled here).
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.amp import import_aliases, qualified
from loopcheck.model.index import Index, import_roots
from loopcheck.model.syntax import keyword, positional

_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine", "ignite.engine.DeterministicEngine",
                      "ignite.engine.deterministic.DeterministicEngine"})


def process_functions(index: Index) -> set[cst.FunctionDef]:
    """The functions of the file passed by name to an ignite ``Engine(...)`` as its process function
    (the one function of that name in the file)."""
    if "ignite" not in import_roots(index.imports):
        return set()
    aliases = import_aliases(index.imports)
    found: set[cst.FunctionDef] = set()
    for call in index.calls:
        if not qualified(call.func, aliases) & _ENGINES:
            continue
        args = positional(call)
        given = keyword(call, "process_function") or (args[0] if args else None)
        if type(given) is cst.Name:
            defs = index.functions.get(given.value, [])
            if len(defs) == 1:
                found.add(defs[0])
    return found


def iteration_counter(fn: cst.FunctionDef) -> str | None:
    """``engine.state.iteration`` for a process function whose first parameter is ``engine``."""
    params = [p.name.value for p in fn.params.params]
    return f"{params[0]}.state.iteration" if params and params[0] not in ("self", "cls") else None
