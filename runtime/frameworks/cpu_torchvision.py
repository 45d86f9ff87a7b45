"""Make PyPI's torchvision importable beside a CPU build of torch.

PyPI's Linux torchvision wheel is a CUDA build: next to the CPU torch its C extension does not
load (it needs ``libc10_cuda.so``), so no ``torchvision::`` operator is registered, and
``import torchvision`` then fails registering fake kernels for ``nms``/``qnms``. transformers
and timm import torchvision whenever it is installed. Declaring those two operator schemas
lets torchvision's Python layer (transforms, ``FrozenBatchNorm2d``) import; its C operators
(detection ops, image decoding) stay unavailable and raise if called. Nothing is done where
torchvision imports on its own."""
from __future__ import annotations

import importlib.util
import sys

_declared = None


def ensure_importable() -> None:
    global _declared
    if importlib.util.find_spec("torchvision") is None:
        return
    try:
        import torchvision  # noqa: F401
        return
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    import torch

    _declared = torch.library.Library("torchvision", "DEF")  # kept alive: it owns the schemas
    for op in ("nms", "qnms"):
        _declared.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import torchvision  # noqa: F401,F811


ensure_importable()
