"""Put on PYTHONPATH by run.py for the real-script runs only. PyPI's torchvision is a CUDA build
whose C operators do not load beside the CPU torch of this machine, and its import then fails;
the first `import torchvision` goes through runtime/frameworks/cpu_torchvision.py, which declares
the two operator schemas torchvision's Python layer needs (nothing else changes). torch itself
is not imported here: the scripts import it when they would."""
import importlib.abc
import importlib.util
import os
import sys


class _TorchvisionFirstImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchvision":
            return None
        sys.meta_path.remove(self)
        sys.path.insert(0, os.environ["LOOPCHECK_REALSCRIPTS_FRAMEWORKS"])
        try:
            import cpu_torchvision  # noqa: F401  (imports torchvision, declaring what it needs)
        finally:
            sys.path.pop(0)
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return sys.modules["torchvision"]

    def exec_module(self, module):
        sys.modules["torchvision"] = module


if os.environ.get("LOOPCHECK_REALSCRIPTS_FRAMEWORKS"):
    sys.meta_path.insert(0, _TorchvisionFirstImport())
