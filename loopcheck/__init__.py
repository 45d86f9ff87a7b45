"""loopcheck: a linter and runtime checker for PyTorch training loops."""

__version__ = "0.1.0"
