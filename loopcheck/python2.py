"""Training scripts still written in Python 2.

Research code of 2016-2019 often ships Python 2 statements (``print 'loss', loss``, ``except
IOError, e:``, ``raise ValueError, "..."``): not valid Python 3, so the whole file would be one syntax
error and every problem of its loops would hide behind it. Such a file is also read with those
statements written as Python 3 on the same lines (a print statement becomes ``pass``: what a training
loop prints changes nothing the rules read), so every line number of the reading is the file's own.
Only lines that hold the statement whole are rewritten; a file whose reading is still not Python 3 is
left to its syntax error.
"""

from __future__ import annotations

import ast

from loopcheck.patterns import Pattern

# `print x`, `print >>f, x`, `print` alone, after an indent or a compound statement's colon; not
# `print(x)` (valid in both), `print = f`, `print.x`
_PRINT = Pattern(r"^(?P<head>[ \t]*(?:(?:if|elif|else|for|while|try|except|finally|with)\b[^#\n]*:[ \t]*)?)print\b"
                 r"(?![ \t]*[(=.,)\]])(?P<rest>[^\n]*)$")
_EXCEPT = Pattern(r"^(?P<head>[ \t]*except[ \t]+)(?P<types>[\w.]+|\([^()\n]*\))[ \t]*,[ \t]*(?P<name>\w+)[ \t]*:")
_RAISE = Pattern(r"^(?P<head>[ \t]*raise[ \t]+)(?P<type>[\w.]+)[ \t]*,[ \t]*(?P<message>[^\n#]+?)[ \t]*$")
_LONG = Pattern(r"(?<![\w.])(\d+)[lL]\b")
_OCTAL = Pattern(r"(?<![\w.])0([0-7]+)\b")
_UNEQUAL = Pattern(r"<>")


def read_as_python3(source: str) -> str | None:
    """``source`` with its Python 2 statements written as Python 3 on the same lines, or None where it
    holds none of them or its reading is still not Python 3."""
    lines = source.split("\n")
    changed = False
    for number, line in enumerate(lines):
        new = _line(line)
        if new is not None and new != line:
            lines[number] = new
            changed = True
    if not changed:
        return None
    read = "\n".join(lines)
    try:
        ast.parse(read)
    except (SyntaxError, ValueError):
        return None
    return read


def _line(line: str) -> str | None:
    stripped = line.rstrip()
    if stripped.endswith(("\\", ",", "(", "[", "{")):
        return None  # a statement that goes on: not rewritten
    if "print" in line and (found := _PRINT.search(line)) is not None and not _in_string(line, found.start("rest")):
        return f"{found.group('head')}pass"
    if "except" in line and (found := _EXCEPT.search(line)) is not None:
        return f"{found.group('head')}{found.group('types')} as {found.group('name')}:{line[found.end():]}"
    if "raise" in line and (found := _RAISE.search(line)) is not None:
        return f"{found.group('head')}{found.group('type')}({found.group('message')})"
    if _UNEQUAL.search(line) and not _in_string(line, line.index("<>")):
        line = line.replace("<>", "!=")
    return _OCTAL.sub(r"0o\1", _LONG.sub(r"\1", line))


def _in_string(line: str, position: int) -> bool:
    """Whether ``position`` of ``line`` is inside a quoted string (quotes counted before it)."""
    before = line[:position]
    return before.count("'") % 2 == 1 or before.count('"') % 2 == 1


NOTE = "a Python 2 statement; the rest of the file was checked reading its Python 2 statements as Python 3"
