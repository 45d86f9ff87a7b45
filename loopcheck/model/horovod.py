"""Horovod's process count as a file spells it.

``horovod.torch.size()`` (also ``horovod.tensorflow`` / ``horovod.keras`` / ``horovod.mxnet``) is the
number of processes of the job, what ``torch.distributed.get_world_size()`` is under DDP; Horovod's
examples scale the learning rate by it (``lr=args.base_lr * hvd.size()``). ``local_size()`` counts the
processes of one host only and is no world size.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.syntax import dotted

_FRAMEWORKS = ("torch", "tensorflow", "keras", "mxnet", "tensorflow.keras")


def horovod_size_names(imports: list[cst.Import | cst.ImportFrom]) -> frozenset[str]:
    """The dotted names that call Horovod's ``size`` in a file with these imports: ``hvd.size`` after
    ``import horovod.torch as hvd`` or ``from horovod import torch as hvd``, ``horovod.torch.size``
    after ``import horovod.torch``, ``size`` after ``from horovod.torch import size``."""
    found: set[str] = set()
    for node in imports:
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = dotted(alias.name) or ""
                if name.startswith("horovod.") and name[8:] in _FRAMEWORKS:
                    bound = dotted(alias.asname.name) if alias.asname is not None else name
                    found.add(f"{bound}.size")
        elif node.module is not None and not node.relative and not isinstance(node.names, cst.ImportStar):
            module = dotted(node.module) or ""
            for alias in node.names:
                name = dotted(alias.name) or ""
                bound = dotted(alias.asname.name) if alias.asname is not None else name
                if module == "horovod" and name in _FRAMEWORKS:
                    found.add(f"{bound}.size")
                elif module.startswith("horovod.") and module[8:] in _FRAMEWORKS and name == "size":
                    found.add(bound or "size")
    return frozenset(found)
