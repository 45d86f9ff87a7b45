"""Which files need the training-loop model: a cheap look with the standard library's ``ast``.

Parsing with libcst costs about ten times ``ast.parse``, and most files that mention ``backward(``
hold no loop that back-propagates: an autograd ``Function`` defines ``backward``, a model's
docstring mentions it, a test calls it once outside any loop. The model only finds training loops
in loops whose body back-propagates, directly or through functions of the same file that it calls
(``train_step(batch)``, ``self.train_step(batch)``, an ``optimizer.step(closure)``), so a file
without such a loop can be skipped by every rule that reads training loops. The test here is a
superset of the model's: any call whose name mentions ``backward`` or a loss scaler counts, and a
loop counts as calling every function of the file whose name it mentions. A file whose text hands the
optimizer to a call (``engine.step(..., optimizer=optimizer)``) is screened too: ``loopcheck.engine``
then counts calls of the project's functions that back-propagate.

``ast.parse`` also says, for the price of the parse, whether the file is valid Python (its own
message and position for a syntax error), or too deeply nested for the parser: libcst hangs or
crashes on expressions CPython already refuses (an 8,000-term sum, a 3,000-call chain).
"""

from __future__ import annotations

import ast
import bisect
import enum
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from loopcheck.patterns import Pattern

# A training loop back-propagates, itself or through a timm/MAE-style `loss_scaler(loss, optimizer)`,
# or through the `self.training_step(model, inputs)` a `transformers.Trainer` subclass inherits: text
# every file with a training loop contains.
_BACKWARD_TEXT = ("backward(", "loss_scaler(")
TRAINING_LOOP_TEXT = (*_BACKWARD_TEXT, "training_step(", "optimizer")  # (see `_HELPER_CALL`)
INHERITED_STEP_TEXT = ("self.training_step(", "self._training_step(")


# A loop may back-propagate inside a function of another project module it hands the optimizer
# (`engine.step(step=i, model=model, optimizer=optimizer, loss=loss)`): whether that function does is
# for the project to say (``loopcheck.engine`` screens again with the names of those that do).
_HELPER_CALL = Pattern(r"\w\([^\n]*\boptimizer\b")
_OPTIMIZER_WORD = Pattern(r"\boptimizer\b")
_OPEN_CALL = Pattern(r"\w\(")
_MAX_MENTIONS = 64  # a file naming the optimizer more often is an optimizer's own module, not a loop's


def has_training_text(source: str) -> bool:
    return training_call_text(source) or "optimizer" in source and _hands_optimizer_in_loop_text(source)


def _hands_optimizer_in_loop_text(source: str) -> bool:
    """A line under a ``for`` or ``while`` line that hands ``optimizer`` to a call opened before it on
    that line (``engine.step(model=model, optimizer=optimizer, loss=loss)``), by the text alone."""
    for count, mention in enumerate(_OPTIMIZER_WORD.finditer(source)):
        if count == _MAX_MENTIONS:
            return False
        start = source.rfind("\n", 0, mention.start()) + 1
        if _OPEN_CALL.search(source, start, mention.start()) is not None and _in_loop_text(source, start):
            return True
    return False


def _in_loop_text(source: str, at: int) -> bool:
    """The line holding ``at`` is indented under a ``for`` or ``while`` line, by the text alone (the
    lines above with less indentation, outwards): most files that hand the optimizer on (factories,
    schedulers) do it outside any loop, and are then never parsed."""
    start = source.rfind("\n", 0, at) + 1
    stop = source.find("\n", at)
    line = source[start:stop if stop >= 0 else len(source)]
    indent = len(line) - len(line.lstrip())
    end = start - 1
    while indent > 0 and end > 0:
        begin = source.rfind("\n", 0, end) + 1
        text = source[begin:end]
        stripped = text.lstrip()
        if stripped and not stripped.startswith("#") and len(text) - len(stripped) < indent:
            if stripped.startswith(("for ", "while ", "async for ")):
                return True
            indent = len(text) - len(stripped)
        end = begin - 1
    return False


def training_call_text(source: str) -> bool:
    """A training loop's own call in the text (``backward(``, a loss scaler, an inherited training step)."""
    return any(text in source for text in _BACKWARD_TEXT) or inherited_triggers(source) != ()


def hands_optimizer_in_loop(tree: ast.Module, source: str) -> bool:
    """A loop of ``tree`` hands the optimizer to a call, on its lines or in a function of the file it
    calls: only then can a function of another module make it a training loop (most files that
    pass the optimizer on, an optimizer or scheduler factory, do it once, outside any loop)."""
    loops, functions = _blocks(tree)
    if not loops:
        return False
    starts = [0, *(m.end() for m in re.finditer("\n", source))]
    direct = sorted({bisect.bisect_right(starts, m.start()) for m in _HELPER_CALL.finditer(source)
                     if _counts(source, m, starts)})
    hot = _with_training_functions(functions, direct, source, starts) if functions and direct else direct
    return any(_any_within(hot, first, last) for first, last in loops)


def inherited_triggers(source: str) -> tuple[str, ...]:
    """Calls that back-propagate in a method the file's classes may inherit: ``self.training_step(model,
    inputs)`` of a ``transformers.Trainer`` subclass (``loopcheck.model.inherited``)."""
    return ("training_step",) if any(text in source for text in INHERITED_STEP_TEXT) else ()


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Statements that hold statements (and the handlers and cases that do), and where they hold them.
_COMPOUND = (*_LOOPS, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
             ast.ExceptHandler, *(getattr(ast, n) for n in ("TryStar", "Match", "match_case") if hasattr(ast, n)))
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


class Verdict(enum.Enum):
    TRAINING_LOOP = "a loop that back-propagates"
    NO_TRAINING_LOOP = "no loop that back-propagates"
    SYNTAX_ERROR = "not valid Python"
    TOO_DEEP = "too deeply nested for Python's parser"


@dataclass(frozen=True)
class Screen:
    verdict: Verdict
    error: SyntaxError | None = None  # SYNTAX_ERROR: Python's message and position
    reason: str = ""  # TOO_DEEP: what the parser said
    tree: ast.Module | None = field(default=None, compare=False, repr=False)  # when it parsed

    def imports(self) -> list[tuple[str, int]]:
        """``(module, relative level)`` of every import of the file (``from . import x`` gives
        ``("x", 1)``, ``from .a import b`` gives ``("a.b", 1)`` and ``("a", 1)``)."""
        found: list[tuple[str, int]] = []
        for node in statements(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.Import):
                found += [(alias.name, 0) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                found += [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names]
                if base:
                    found.append((base, node.level))
        return found

    def rescreen(self, source: str, triggers: Collection[str]) -> Screen:
        """The verdict again, counting calls of ``triggers`` (imported functions that back-propagate)."""
        if self.tree is None or self.verdict is not Verdict.NO_TRAINING_LOOP or not triggers:
            return self
        found = has_training_loop(self.tree, source, (*triggers, *inherited_triggers(source)))
        return Screen(Verdict.TRAINING_LOOP if found else Verdict.NO_TRAINING_LOOP, tree=self.tree)


def screen(source: str, filename: str = "<unknown>", triggers: Collection[str] = ()) -> Screen:
    """What ``ast`` says about ``source``. ``triggers``: names of calls that back-propagate besides
    those mentioning ``backward`` or a loss scaler (wrappers defined in other modules)."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as error:
        return Screen(Verdict.SYNTAX_ERROR, error=error)
    except (RecursionError, MemoryError) as error:
        return Screen(Verdict.TOO_DEEP, reason=f"{type(error).__name__}: {error}")
    except ValueError as error:  # source code string cannot contain null bytes
        return Screen(Verdict.SYNTAX_ERROR, error=SyntaxError(str(error), (filename, 1, 1, "")))
    found = has_training_loop(tree, source, (*triggers, *inherited_triggers(source)))
    return Screen(Verdict.TRAINING_LOOP if found else Verdict.NO_TRAINING_LOOP, tree=tree)


# Calls that may back-propagate, as the model reads them: `x.backward(...)` and `backward(...)`
# (`loss.backward()`, `accelerator.backward(loss)`, `torch.autograd.backward(...)`),
# `self.manual_backward(loss)`, and loss scalers (`loss_scaler(loss, optimizer)`,
# `scaler.__call__(...)`) but not a GradScaler's constructor. Definitions (`def backward(ctx, g)` of
# an autograd Function) and whole-line comments do not count; strings do (a superset is safe).
# Every alternative starts with a plain character (the check that no word character or dot precedes
# `backward` comes after its first letter), so the search skips to those characters instead of trying
# each alternative at every position of the file: several times faster, the same matches.
_TRIGGER = Pattern(r"m(?<![\w.]m)anual_backward\s*\(|b(?<![\w.]b)ackward\s*\(|\.(?:manual_)?backward\s*\("
                   r"|Scaler\w*\s*\(|scaler\w*\s*\(|__call__\s*\(")
def has_training_loop(tree: ast.Module, source: str, triggers: Collection[str] = ()) -> bool:
    """Whether a loop of ``tree`` may back-propagate: a trigger call on its lines, or a mention of a
    function of the file that may (transitively: a function whose lines hold a trigger or mention
    such a function). Lines, not nodes: walking the statements is much cheaper than every node."""
    trigger = _TRIGGER if not triggers else re.compile(
        _TRIGGER.pattern + r"|(?:" + "|".join(map(re.escape, triggers)) + r")\s*\(")
    return _trains(tree, source, lambda: trigger.finditer(source))


def may_train_with(tree: ast.Module, source: str, names: Collection[str]) -> bool:
    """Whether ``has_training_loop(tree, source, triggers)`` can hold for some ``triggers`` drawn from
    ``names``: each name's calls are found on their own, so their lines are a superset of those
    of any one pattern of several names (whose matches cannot overlap). Cheap: only names that
    end some called word are searched."""
    searched = [re.compile(re.escape(name) + r"\s*\(") for name in called_among(source, names)]
    if not searched:
        return False  # the triggers add no line to those that gave the verdict
    return _trains(tree, source, lambda: (m for pattern in (_TRIGGER, *searched) for m in pattern.finditer(source)))


_CALLED = Pattern(r"\b(\w+)\s*\(")  # from a word's start only: no match starts inside a word anyway


def called_among(source: str, names: Collection[str]) -> list[str]:
    """Those of ``names`` that end a word called in ``source`` (``f(``, ``x.f (``): the others
    cannot match a trigger pattern ``name\\s*\\(`` anywhere in it."""
    called = {word[i:] for word in set(_CALLED.findall(source)) for i in range(len(word))}
    return [name for name in names if name in called]


def _trains(tree: ast.Module, source: str, matches: Callable[[], Iterable[re.Match[str]]]) -> bool:
    """``has_training_loop`` for the trigger calls ``matches()`` finds."""
    loops, functions = _blocks(tree)
    if not loops and not functions:
        return False
    starts = [0, *(m.end() for m in re.finditer("\n", source))]
    found = [m for m in matches() if _counts(source, m, starts)]
    direct = sorted({bisect.bisect_right(starts, m.start()) for m in found})
    if loops:
        hot = _with_training_functions(functions, direct, source, starts) if functions and direct else direct
        if any(_any_within(hot, first, last) for first, last in loops):
            return True
    if not direct:
        return False
    # for a step function: calls with arguments or a `.backward()` (not a `NativeScaler()` built)
    direct = sorted({bisect.bisect_right(starts, m.start()) for m in found
                     if m.group().startswith(".") or not source[m.end():m.end() + 40].lstrip().startswith(")")})
    if _step_function(functions, direct, source, starts):
        return True
    # or an ignite process function (`Engine(update)` calls it once per batch): one that back-propagates
    if "ignite" in source and _ENGINE_CALL.search(source) is not None and any(
            _any_within(direct, first, last) for _, first, last in functions):
        return True
    # or one whose backward is in a helper of the file it calls (`backward_step(optimizer, model, loss)`)
    return bool(direct) and _MODULO.search(source) is not None and _step_function(
        functions, _with_training_functions(functions, direct, source, starts), source, starts)


_ENGINE_CALL = Pattern(r"\bEngine\s*\(")
# A modulo the model can read as a step condition: compared (`n % N == 0`, also in `need = ...`) or
# tested by an `if` (`if (i + 1) % N:`); not `"%d" % x`. Or the flag a step method's caller sets on
# the calls that only accumulate (`if not self.is_grad_accumulation_step:`).
_MODULO = Pattern(r"%[^\n#]*[=!]=|^[ \t]*(?:el)?if\b[^\n#]*(?:%|\bself\.is_(?:grad_|gradient_)?accumulation_step\b)",
                  re.M)


def _step_function(functions: list[tuple[str, int, int]], direct: list[int], source: str,
                   starts: list[int]) -> bool:
    """A function that back-propagates and tests a counter with ``%`` (``if self.n_iter % accum == 0:
    optimizer.step()``) or its caller's accumulation flag: called once per micro-batch, it accumulates
    across its calls."""
    modulo = sorted({bisect.bisect_right(starts, m.start()) for m in _MODULO.finditer(source)})
    if modulo and functions:
        # or calls a predicate of the file that tests it (`if should_step(iteration, n):`)
        modulo = _with_training_functions(functions, modulo, source, starts)
    return bool(modulo) and any(_any_within(direct, first, last) and _any_within(modulo, first, last)
                                for _, first, last in functions)


def _with_training_functions(functions: list[tuple[str, int, int]], hot: list[int], source: str,
                             starts: list[int]) -> list[int]:
    """``hot`` plus the lines that mention a function that may back-propagate, transitively."""
    # The innermost function around each line (ranges nest: outer ones are painted first).
    innermost = [-1] * (len(starts) + 2)
    parent = [-1] * len(functions)
    for i, (_, first, last) in sorted(enumerate(functions), key=lambda f: (f[1][1], -f[1][2])):
        parent[i] = innermost[first]
        innermost[first:last + 1] = [i] * (last - first + 1)
    lines, training, searched = set(hot), set(), set()
    new = set(hot)
    while new:
        names = set()
        for line in new:  # each function around a hot line may back-propagate
            f = innermost[line] if line < len(innermost) else -1
            while f != -1 and f not in training:
                training.add(f)
                names.add(functions[f][0])
                f = parent[f]
        names -= searched
        searched |= names
        if not names:
            break
        # One search per round of newly found names (few): a pattern of every function name would
        # try each alternative at every position of the file.
        pattern = re.compile("|".join(map(re.escape, sorted(names, key=len, reverse=True))))
        uses = [m for m in pattern.finditer(source)
                if _whole_word(source, m) and _used(source, m) and _counts(source, m, starts)]
        found = {bisect.bisect_right(starts, m.start()) for m in uses}
        new = found - lines
        lines |= found
        # `backwards = partial(loss_backwards, fp16)`: calls of `backwards` back-propagate too
        aliases = {alias.group(1) for m in uses
                   if (alias := _PARTIAL.search(source, max(0, m.start() - 120), m.start()))} - searched
        if aliases:
            searched |= aliases
            pattern = re.compile("|".join(map(re.escape, sorted(aliases, key=len, reverse=True))))
            calls = {bisect.bisect_right(starts, m.start()) for m in pattern.finditer(source)
                     if _whole_word(source, m) and _used(source, m) and _counts(source, m, starts)}
            new |= calls - lines
            lines |= calls
    return sorted(lines)


# The name a `functools.partial` of a function is bound to, ending where the function's name begins
# (`backwards = partial(`, `self.bw = functools.partial(`): the last part of the target is the name
# its calls use.
_PARTIAL = Pattern(r"(\w+)\s*=\s*(?:functools\s*\.\s*)?partial\s*\(\s*\Z")


def _counts(source: str, match: re.Match[str], starts: list[int]) -> bool:
    """Whether a match is code that may run: not a definition, a GradScaler or a whole-line comment."""
    line_start = starts[bisect.bisect_right(starts, match.start()) - 1]
    before = source[line_start:match.start()]
    if before.lstrip().startswith("#"):
        return False
    word_start = match.start() - (1 if source[match.start()] == "." else 0)
    return not before.rstrip(".").endswith(("def ", "Grad")) and not source[word_start - 4:match.start()] == "Grad"


def _used(source: str, match: re.Match[str]) -> bool:
    """A function name that is called (``train_step(``) or passed on (``step(closure)``,
    ``fn=closure``), not merely mentioned (a comment about the ``forward`` pass)."""
    after = source[match.end():match.end() + 80].lstrip()
    before = source[max(0, match.start() - 80):match.start()].rstrip()
    return after.startswith("(") or before.endswith(("(", ",", "=")) and after[:1] in (")", ",", "")


def _whole_word(source: str, match: re.Match[str]) -> bool:
    before = source[match.start() - 1] if match.start() else " "
    after = source[match.end()] if match.end() < len(source) else " "
    return not (before.isalnum() or before == "_" or after.isalnum() or after == "_")


def _any_within(lines: list[int], first: int, last: int) -> bool:
    i = bisect.bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


def statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every statement of ``tree``, at any depth (an import is a statement: no need to walk
    every expression node for them)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            yield node
        if isinstance(node, _COMPOUND):
            for name in _BLOCKS:
                stack.extend(getattr(node, name, ()))


def _blocks(tree: ast.Module) -> tuple[list[tuple[int, int]], list[tuple[str, int, int]]]:
    """Line ranges of the loops and of the functions (with their names) of ``tree``, found by
    walking statements only."""
    loops: list[tuple[int, int]] = []
    functions: list[tuple[str, int, int]] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if not isinstance(node, _COMPOUND):
            continue  # a simple statement holds no statements
        if isinstance(node, _LOOPS):
            loops.append((node.lineno, node.end_lineno or node.lineno))  # type: ignore[attr-defined]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.name, node.lineno, node.end_lineno or node.lineno))
        for name in _BLOCKS:
            stack.extend(getattr(node, name, ()))
    return loops, functions
