"""loopcheck's own modules' code kept beside the result cache where Python keeps no __pycache__."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

from loopcheck import module_code


def test_the_kept_code_is_used_for_the_same_source_only(tmp_path: Path) -> None:
    file = tmp_path / "code.marshal"
    first = module_code._Finder(file)
    compiled: list[bytes] = []

    def compile_(text: bytes) -> object:
        return lambda: compiled.append(text) or compile(text, "m.py", "exec")

    code = first.code("/x/m.py", b"A = 1\n", compile_(b"A = 1\n"))
    first.save()
    again = module_code._Finder(file)
    assert again.code("/x/m.py", b"A = 1\n", compile_(b"A = 1\n")) == code
    assert compiled == [b"A = 1\n"]  # the second run compiled nothing
    edited = again.code("/x/m.py", b"A = 2\n", compile_(b"A = 2\n"))
    namespace: dict[str, object] = {}
    exec(edited, namespace)  # noqa: S102
    assert namespace["A"] == 2 and compiled == [b"A = 1\n", b"A = 2\n"]  # an edited module is never run stale


def test_an_unreadable_file_only_costs_the_compiling(tmp_path: Path) -> None:
    file = tmp_path / "code.marshal"
    file.write_bytes(b"not marshal")
    finder = module_code._Finder(file)
    code = finder.code("/x/m.py", b"B = 3\n", lambda: compile(b"B = 3\n", "m.py", "exec"))
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102
    assert namespace["B"] == 3


def test_the_command_line_keeps_the_code_of_the_modules_it_imported(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOOPCHECK_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-m", "loopcheck", "check", "--no-cache", "train.py"], cwd=tmp_path,
                           env=env, capture_output=True, text=True) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and runs[0].returncode == runs[1].returncode
    kept = marshal.loads(module_code.path(tmp_path / "cache").read_bytes())
    files = {Path(name).name for name, _, _ in kept}
    assert {"checker.py", "engine.py", "builder.py"} <= files
