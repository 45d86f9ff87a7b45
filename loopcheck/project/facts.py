"""What one project module offers to the files that import it, read with the stdlib ``ast``.

Only facts a training loop in another file can depend on: which functions (and methods) back-
propagate, step or zero an argument, leave an argument in eval mode, wrap a module in
``DistributedDataParallel``, control DDP's gradient sync, return a value still attached to the
autograd graph, or return a scheduler (``schedules``: as the caller would build it); what the
module imports; and where it builds a DDP wrapper itself (an entry script). Parsing with ``ast`` costs a tenth of a libcst parse, and the facts are plain data that
cache as JSON.

>>> facts = extract("def smart_ddp(model):\\n    return DDP(model, device_ids=[0])\\n", "utils.py")
>>> facts.functions["smart_ddp"].wraps_ddp
True
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

from loopcheck.patterns import Pattern
from loopcheck.project.environments import not_an_optimizer_step, unpacked_results
from loopcheck.project.flow import graph_from, keeps, may_flow
from loopcheck.project.schedules import SCHEDULE_TEXT, returned, returned_in_tuples
from loopcheck.project.state_init import empty_state_test
from loopcheck.project.walk import last_name, own_nodes, parsed, walk

_DDP = {"DistributedDataParallel", "DDP"}
# Where a module may call one of them: the name (not the end of a longer one, `smart_DDP`), then only
# blanks, comments, line continuations or closing parentheses before the call's (walking every node
# of a module that merely mentions DDP costs).
# `% cfg.grad_accum_iters`, `% (self.cfg.n)`: a step condition that may count to a setting another
# module gives (``loopcheck.project.unset_keywords``); a superset (`"%s.png" % name`), kept short to compile
_MODULUS_ATTRIBUTE = Pattern(r"%[ \t(]*[^\W\d]\w*\.[^\W\d]")
_MODULUS_NAME = Pattern(r"%[ \t(]*([^\W\d]\w*)\b(?![.(\[])")
_ACCELERATE_COUNT = Pattern(r"\bgradient_accumulation_steps[ \t]*=[ \t]*([^\W\d]\w*)\b(?![.(\[])")
_DDP_CALL = Pattern(r"(?:DistributedDataParallel(?<!\wDistributedDataParallel)|DDP(?<!\wDDP))"
                    r"(?:\s|\\|\)|#[^\n]*)*\(")  # the look-behinds after the names: searched fast
_SYNC = {"no_sync", "require_backward_grad_sync", "no_backward_sync", "set_requires_gradient_sync"}
_DETACH = {"item", "detach", "tolist", "numpy", "cpu_item"}
_NO_GRAD = {"no_grad", "inference_mode"}
# Clipping that unscales nothing itself: torch's and timm's (the model's CLIP_FUNCTIONS also names
# Lightning's and Accelerate's, which unscale first; this module stays free of libcst)
_CLIPS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "dispatch_clip_grad", "adaptive_clip_grad"}
_MAX_DEPTH = 3
# A function whose text matches none of these (and that calls no function that does) has no effect
# a loop can use: what ``_Reader`` looks for, as text (a superset: the reader decides).
_EFFECT = Pattern("|".join([r"backward", r"zero_grad", r"\.grad\b", r"\.\s*(?:step|eval|train)\s*\(",
                            r"clip_grad", *_DDP, *_SYNC]))


@dataclass(frozen=True)
class FunctionFacts:
    """A function or method: argument positions (``self`` left out) its effects apply to."""

    line: int
    params: tuple[str, ...] = ()
    backward: int | None = None  # the argument whose value is back-propagated
    steps: tuple[int, ...] = ()  # arguments stepped as optimizers (`opt.step()`)
    # `scaler.step(opt)` of an argument `opt`: (the scaler: its argument position, or its name in the
    # function, e.g. "self.scaler"; the optimizer's position; whether the function also updates the scaler)
    scaler_steps: tuple[tuple[int | str, int, bool], ...] = ()
    zeroes: bool = False  # clears gradients (`zero_grad(...)`, `p.grad = None`)
    clips: bool = False  # clips gradients (`clip_grad_norm_`, `p.grad.data.clamp_(-c, c)`) and unscales none
    evals: tuple[int, ...] = ()  # arguments left in eval mode when it returns
    # (argument, parameter, value): that argument's switch to eval mode runs only where the parameter
    # is that value (`if not is_training: model.eval()` is (0, 3, False))
    evals_unless: tuple[tuple[int, int, bool], ...] = ()
    # arguments put in train mode before the function's first backward or step (an epoch function that
    # starts with `model.train()`), or last left in train mode by one that trains nothing
    trains: tuple[int, ...] = ()
    wraps_ddp: bool = False  # returns DistributedDataParallel(<argument>)
    controls_sync: bool = False  # enters no_sync() / sets require_backward_grad_sync
    returns_graph: bool = False  # returns what calling an argument (a model) computed, undetached
    # (a, b): every return is a tuple whose element a is computed from element b alone (`return
    # loss_sum, loss_dict` with `loss_sum = sum(loss_dict.values())`): where the caller back-propagates
    # element a, element b holds the graph
    derived: tuple[tuple[int, int], ...] = ()
    builds: str = ""  # the class of its own module whose new instance it returns (a factory)
    graph_from: tuple[int, ...] = ()  # the argument its return is computed from, differentiably (flow.graph_from)
    keeps: tuple[int, ...] = ()  # arguments a method stores in its object (flow.keeps)
    # the scheduler constructor each return hands back, as the caller would write it (schedules.returned)
    schedules: tuple[str, ...] = ()
    # the same for each element of the tuples every return hands back that holds a scheduler
    # (`return optimizer, scheduler`: ((1, (constructor, ...)),)), read by `optimizer, scheduler = f(...)`
    schedules_at: tuple[tuple[int, tuple[str, ...]], ...] = ()
    # elements of a tuple return that hold a plain number in every return (`dual_loss = lm_loss.item()`
    # ... `return lm_loss, dual_loss, align_loss, contras_loss` with `align_loss = 0`): no graph there
    numbers: tuple[int, ...] = ()
    # a method's effects on its object's optimizers, in the order every call runs them (``own_effects``):
    # ("zero", "self.optimizer", ""), ("step", "self.optimizer", scaler or ""), ("update", "self.scaler", ""),
    # ("backward", argument position, scaler or "")
    own: tuple[tuple[str, str, str], ...] = ()
    own_partial: bool = False  # an effect ``own`` leaves out (under a test, or on what it cannot name)
    # where ``own`` is partial only for tests: every own effect with the tests it runs under, in order
    # (``gated_effects``): (kind, what, scaler, ((test as text, negated, which `if`, branch), ...))
    gated: tuple[tuple[str, str, str, tuple[tuple[str, bool, int, str], ...]], ...] = ()


@dataclass
class ModuleFacts:
    path: str
    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    classes: dict[str, dict[str, FunctionFacts]] = field(default_factory=dict)
    # local name -> (module as written, attribute or "", relative level)
    imports: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    ddp_lines: tuple[int, ...] = ()  # where the module itself calls DistributedDataParallel(...)
    # plain names it calls (an entry script calling `train_one_epoch`) or subclasses (`class Trainer(BaseTrainer)`)
    called: tuple[str, ...] = ()
    # (method, parameter: a keyword or a position) of calls `obj.method(...)` that pass the DDP wrapper
    # it builds (a runner calling `self.task.train_epoch(model=self.model)`, `model` a property returning it)
    passes_ddp: tuple[tuple[str, str], ...] = ()
    # top-level functions that return a DDP wrapper they build (`def prepare_parallel(G, D): D = DDP(D);
    # return G, D`): a file that calls one hands DDP modules to what it calls next
    returns_ddp: tuple[str, ...] = ()
    # `import a.b` (no `as`): the submodules a call `a.b.fn(...)` may run, which `imports` names as `a`
    dotted_imports: tuple[str, ...] = ()
    # `from module import *`: (module, relative level) of each (``loopcheck.project.star_imports``)
    star_imports: tuple[tuple[str, int], ...] = ()
    # top-level function -> the callees (dotted names) whose results it returns (``return wrap(m)``, or
    # ``m = wrap(m)`` ... ``return m``, alone or in a tuple); read only for the files that call a
    # DDP-returning helper (``loopcheck.project.ddp_helpers``), kept so that a warm run need not parse
    # them again; None: not read
    returned_calls: dict[str, tuple[str, ...]] | None = None
    # its text takes a modulus that is an attribute (`iteration % cfg.grad_accum_iters`) or a parameter
    # with an inert default (`% acc_steps` in `def fit(..., acc_steps=1)`): a setting another module may
    # give (``loopcheck.project.unset_keywords``)
    counts_to_attribute: bool = False
    complete: bool = True  # every function read (else only those of ``names``: a checked file's own view has none)
    # when not complete: the top-level functions and methods read (``Trainer.step``; ``*.step``: of every class)
    names: tuple[str, ...] = ()
    # imports and DDP wraps read (facts of a few names, read block by block, leave them out: a module
    # checked later as a file of its own must not take its imports for none)
    outlined: bool = True

    def knows(self, names: Collection[str] | None) -> bool:
        """Whether the facts of ``names`` (None: of every function) have been read."""
        return self.complete or names is not None and set(names) <= set(self.names)

    def with_outline(self, outline: ModuleFacts) -> ModuleFacts:
        """These facts with the imports and DDP wraps of ``outline``."""
        return replace(self, imports=outline.imports, ddp_lines=outline.ddp_lines, called=outline.called,
                       passes_ddp=outline.passes_ddp, returns_ddp=outline.returns_ddp,
                       dotted_imports=outline.dotted_imports, counts_to_attribute=outline.counts_to_attribute,
                       star_imports=outline.star_imports, outlined=True)

    def to_json(self) -> dict[str, object]:
        """Plain data for ``json`` (what ``asdict`` gives, without its deep copies)."""
        return {"path": self.path, "functions": {k: dict(vars(f)) for k, f in self.functions.items()},
                "classes": {c: {k: dict(vars(f)) for k, f in ms.items()} for c, ms in self.classes.items()},
                "imports": dict(self.imports), "ddp_lines": self.ddp_lines, "called": self.called,
                "passes_ddp": self.passes_ddp, "returns_ddp": self.returns_ddp,
                "dotted_imports": self.dotted_imports, "returned_calls": self.returned_calls,
                "counts_to_attribute": self.counts_to_attribute, "star_imports": self.star_imports,
                "complete": self.complete, "names": self.names, "outlined": self.outlined}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ModuleFacts:
        def fn(item: dict[str, object]) -> FunctionFacts:
            return FunctionFacts(**{k: _tuples(v) for k, v in item.items()})  # type: ignore[arg-type]

        return cls(
            path=str(data["path"]),
            functions={k: fn(v) for k, v in data["functions"].items()},  # type: ignore[union-attr]
            classes={c: {k: fn(v) for k, v in ms.items()} for c, ms in data["classes"].items()},  # type: ignore[union-attr]
            imports={k: (v[0], v[1], v[2]) for k, v in data["imports"].items()},  # type: ignore[union-attr]
            ddp_lines=tuple(data["ddp_lines"]),  # type: ignore[arg-type]
            called=tuple(data["called"]),  # type: ignore[arg-type]
            passes_ddp=tuple(tuple(p) for p in data.get("passes_ddp", ())),  # type: ignore[union-attr, misc]
            returns_ddp=tuple(data.get("returns_ddp", ())),  # type: ignore[arg-type]
            dotted_imports=tuple(data.get("dotted_imports", ())),  # type: ignore[arg-type]
            star_imports=tuple((m, int(n)) for m, n in stars)  # type: ignore[union-attr]
            if (stars := data.get("star_imports")) else (),
            returned_calls=None if (returned := data.get("returned_calls")) is None
            else {k: tuple(v) for k, v in returned.items()},  # type: ignore[attr-defined]
            counts_to_attribute=bool(data.get("counts_to_attribute", False)),
            complete=bool(data.get("complete", True)),
            names=tuple(data.get("names", ())),  # type: ignore[arg-type]
            outlined=bool(data.get("outlined", True)),
        )


def _parameter_gate(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
                    index: dict[str, int]) -> tuple[int, bool] | None:
    """``if not is_training: model.eval()``: the parameter (its position) and the value under which
    the outermost ``if`` around ``call`` that tests a parameter alone runs it; None where none does."""
    parents = {id(child): node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
    found: tuple[int, bool] | None = None
    node: ast.AST = call
    while id(node) in parents and node is not function:
        parent = parents[id(node)]
        if isinstance(parent, ast.If) and node is not parent.test:
            test, positive = parent.test, any(node is n for n in parent.body)
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, positive = test.operand, not positive
            if isinstance(test, ast.Name) and test.id in index:
                found = index[test.id], positive
        node = parent
    return found


def _tuples(value: object) -> object:
    """JSON lists back to (nested) tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def extract(source: str, path: str, functions: bool = True, tree: ast.Module | None = None) -> ModuleFacts:
    """The facts of one module (empty when it does not parse); without ``functions``, only its
    imports and DDP wraps (what the file being checked, or an entry script, says about itself).
    ``tree``: ``ast.parse(source)``, if already parsed."""
    reader = ModuleReader(source, path, tree)
    return reader.read(reader.outline(), None) if functions else reader.outline()


class ModuleReader:
    """One module's facts, read a name at a time where only some names are asked for (a module
    defines many functions; a loop calls a few): the same facts as ``extract`` for those names,
    less those with no effect. Until the whole module is needed (its imports, every function), only
    the top-level blocks that a lookup names, and the functions they call, are parsed."""

    def __init__(self, source: str, path: str, tree: ast.Module | None = None) -> None:
        self.source, self.path = source, path
        self._tree, self._parsed = tree, tree is not None
        self._wanted: set[ast.AST] | None = None
        self._reader: _Reader | None = None
        self._blocks: _Blocks | None = None
        self._block_reader: _Reader | None = None

    @property
    def tree(self) -> ast.Module | None:
        """The whole module's ``ast`` (None when it does not parse)."""
        if not self._parsed:
            self._tree = parsed(self.source)
            self._parsed = True
        return self._tree

    def adopt(self, tree: ast.Module | None) -> None:
        """Take ``tree`` (the module's ``ast``, parsed elsewhere) as the whole module's."""
        if tree is not None and not self._parsed:
            self._tree, self._parsed = tree, True

    def outline(self) -> ModuleFacts:
        """Imports and DDP wraps, no function read yet."""
        facts = ModuleFacts(path=self.path, complete=False)
        tree = self.tree
        if tree is None:
            return facts
        statements = _statements(tree)
        facts.imports.update(import_table(statements))
        facts.dotted_imports = tuple(sorted({alias.name for node in statements if isinstance(node, ast.Import)
                                             for alias in node.names if alias.asname is None and "." in alias.name}))
        facts.counts_to_attribute = "%" in self.source and (_MODULUS_ATTRIBUTE.search(self.source) is not None
                                                            or _counts_to_a_parameter(tree, self.source)) \
            or "Accelerator" in self.source and _counts_to_a_parameter(tree, self.source)
        # `import *` is only allowed at a module's top level (also under a top-level `if`/`try`)
        facts.star_imports = tuple((node.module or "", node.level) for node in _top_level(tree)
                                   if type(node) is ast.ImportFrom and node.names[0].name == "*")
        if ("DDP" in self.source or "DistributedDataParallel" in self.source) and _DDP_CALL.search(self.source):
            # an entry script, maybe (the substring tests rule out most modules faster than the pattern)
            ddp_lines, called = [], set()
            nodes = walk(tree)  # walked once, for each fact below
            for node in nodes:
                if isinstance(node, ast.Call):
                    if last_name(node.func) in _DDP:
                        ddp_lines.append(node.lineno)
                    if isinstance(node.func, ast.Name):
                        called.add(node.func.id)
                elif isinstance(node, ast.ClassDef):
                    # a subclass runs its base's methods (`class Trainer(BaseTrainer)`): the base's
                    # module is used as a called one is
                    called.update(base.id for base in node.bases if isinstance(base, ast.Name))
            facts.ddp_lines, facts.called = tuple(sorted(ddp_lines)), tuple(sorted(called))
            if ddp_lines:
                facts.passes_ddp = _passes_ddp(nodes, facts.imports)
                facts.returns_ddp = _returns_ddp(tree, ddp_lines)
        return facts

    def returned_calls(self) -> dict[str, tuple[str, ...]]:
        """``ModuleFacts.returned_calls``: each top-level function that returns a call's result."""
        found: dict[str, set[str]] = {}
        for node in self.tree.body if self.tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (calls := _returned_calls(node)):
                found.setdefault(node.name, set()).update(calls)  # a name defined twice: either may run
        return {name: tuple(sorted(calls)) for name, calls in found.items()}

    def read(self, facts: ModuleFacts, names: Collection[str] | None) -> ModuleFacts:
        """``facts`` (an ``outline``, or facts of other names) plus those of ``names``: top-level
        functions (``train_step``) and methods (``Trainer.step``); None: all, and the result is
        complete. ``facts`` is not changed."""
        found = replace(facts, functions=dict(facts.functions), classes=dict(facts.classes),
                        complete=facts.complete or names is None,
                        names=() if names is None else tuple(sorted({*facts.names, *names})))
        if facts.complete:
            return found
        if names is not None and not self._parsed:
            try:
                functions, classes = self._read_blocks(set(names) - set(facts.names))
            except _Whole:
                pass
            else:
                found.functions.update(functions)
                for name, methods in classes.items():
                    found.classes[name] = {**found.classes.get(name, {}), **methods}
                return found
        if self.tree is None:
            return found
        if self._reader is None:
            self._reader = _Reader(self.tree)
            self._wanted = _with_effects(self.tree, self.source)
        reader, wanted = self._reader, self._wanted
        assert wanted is not None
        asked = None if names is None else set(names) - set(facts.names)
        if asked == set():
            return found
        last_class = {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (asked is None or node.name in asked) and node in wanted:
                    found.functions[node.name] = reader.function(node, None)
            elif isinstance(node, ast.ClassDef) and last_class[node.name] is node:  # the last definition counts
                methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if asked is None:
                    found.classes[node.name] = {name: reader.function(m, methods) for name, m in methods.items()
                                                if m in wanted}
                    continue
                prefix = f"{node.name}."
                some = {n[len(prefix):] for n in asked if n.startswith(prefix)} | {
                    n[2:] for n in asked if n.startswith("*.")}
                if some:
                    read = {name: reader.function(methods[name], methods) for name in some
                            if name in methods and methods[name] in wanted}
                    found.classes[node.name] = {**found.classes.get(node.name, {}), **read}
        return found

    def _read_blocks(self, asked: set[str]) -> tuple[dict[str, FunctionFacts], dict[str, dict[str, FunctionFacts]]]:
        """The facts of ``asked`` with an effect, from their own blocks of text (raises ``_Whole``
        where the text cannot be cut into blocks with certainty)."""
        if self._blocks is None:
            self._blocks = _Blocks(self.source)
            self._block_reader = _Reader(self._blocks)
        blocks, reader = self._blocks, self._block_reader
        assert reader is not None
        functions: dict[str, FunctionFacts] = {}
        classes: dict[str, dict[str, FunctionFacts]] = {}
        for name in sorted(asked):
            owner, _, method = name.rpartition(".")
            if not owner:
                node = blocks.function(name)
                if node is not None and blocks.may_have_effect(node, ()) and _effective(
                        facts := reader.function(node, None)):
                    functions[name] = facts
                continue
            for cls in blocks.classes_defining(method) if owner == "*" else [blocks.cls(owner)]:
                if cls is None:
                    continue
                methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if method in methods and blocks.may_have_effect(methods[method], methods) and _effective(
                        facts := reader.function(methods[method], methods)):
                    classes.setdefault(cls.name, {})[method] = facts
        return functions, classes


def _is_grad(node: ast.expr | None) -> bool:
    """``p.grad`` or ``p.grad.data``: what an in-place clamp clips."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "grad"


def _norm_scaled(call: ast.Call, receiver: ast.expr | None, nodes: list[ast.AST]) -> bool:
    """``p.grad.detach().mul_(clip_coef)`` with ``clip_coef = max_norm / (total_norm + 1e-6)``: a
    gradient scaled in place by a coefficient worked out from a norm, the body of torch's
    ``clip_grad_norm_`` copied into a project's helper."""
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and receiver.func.attr == "detach":
        receiver = receiver.func.value  # `p.grad.detach().mul_(c)`: the same storage
    if not _is_grad(receiver) or len(call.args) != 1:
        return False
    factor = call.args[0]
    values = [factor]
    if isinstance(factor, ast.Name):
        values = [sub.value for sub in nodes if isinstance(sub, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == factor.id for t in sub.targets)]
    return bool(values) and all(any(isinstance(n, ast.Name) and "norm" in n.id.lower() for n in ast.walk(v))
                                and isinstance(v, ast.BinOp) and isinstance(v.op, ast.Div) for v in values)


def _effective(facts: FunctionFacts) -> bool:
    """Whether a loop calling the function can see an effect (else its facts are left out, as a
    lookup that finds nothing)."""
    return (facts.backward is not None or bool(facts.steps or facts.scaler_steps or facts.evals or facts.trains)
            or facts.zeroes or facts.clips or facts.wraps_ddp or facts.controls_sync or facts.returns_graph
            or bool(facts.derived or facts.builds or facts.graph_from or facts.keeps or facts.schedules
                    or facts.schedules_at or facts.numbers or facts.own) or facts.own_partial)


class _Whole(Exception):
    """The module's text cannot be cut into top-level blocks with certainty: parse it whole."""


# A top-level `def`/`class` line, and its name
_DEFINITION = Pattern(r"(?:async\s+def|def|class)\s+(\w+)")
_MAX_GROWTH = 8  # blocks whose parse is retried with the next block added (column-0 text in a docstring)


class _Blocks:
    """The top-level functions and classes of a module, each parsed from its own lines. A block
    runs from a line at column 0 (decorators joined to what they decorate) to the next; blank,
    comment and closing-bracket lines never start one. A cut inside a string or a bracket leaves an
    unterminated block, which does not parse: the block grows by the next one and is parsed again.
    A definition that may sit inside a string (an odd number of triple quotes before it, or a
    backslash ending the line above), or a name defined twice, is left to the whole module's
    reading, and so is a block that does not parse as one definition of the name looked for."""

    def __init__(self, source: str) -> None:
        if source.count("\r") != source.count("\r\n") or "\x0c" in source or source.startswith("\ufeff"):
            raise _Whole  # line ends or a top-level indentation the cut below would not see as the parser does
        self.source, self.lines = source, source.split("\n")
        lines = self.lines
        starts = [i for i, line in enumerate(lines) if line and line[0] not in " \t#)]}\r" and not line.isspace()]
        self.ends = dict(zip(starts, [*starts[1:], len(lines)]))
        # name -> (first line of its decorators, its definition's line, whether it surely is code)
        self.defined: dict[str, list[tuple[int, int, bool]]] = {}
        self.kinds: dict[str, str] = {}
        self.definitions: list[tuple[int, str]] = []  # (line, name) of each definition, in order
        first, quotes, counted = None, 0, 0
        for start in starts:
            quotes += sum(line.count('"""') + line.count("'''") for line in lines[counted:start])
            counted = start
            line = lines[start]
            sure = quotes % 2 == 0 and not (start and lines[start - 1].rstrip().endswith("\\"))
            if line.startswith("@"):
                first = (start, sure) if first is None else (first[0], first[1] and sure)
                continue
            match = _DEFINITION.match(line)
            if match is not None:
                name = match.group(1)
                top, sure = (start, sure) if first is None else (first[0], first[1] and sure)
                self.defined.setdefault(name, []).append((top, start, sure))
                self.kinds[name] = "class" if line.startswith("class") else "def"
                self.definitions.append((start, name))
            first = None
        self._parsed: dict[str, ast.stmt | None] = {}

    def may_have_effect(self, node: ast.FunctionDef | ast.AsyncFunctionDef, methods: Collection[str]) -> bool:
        """Whether a function (a method of a class with ``methods``) may have facts: its text shows an
        effect or a call of an argument, or it calls a function of the module or of its class
        (``_with_effects``' test, with the callees' own texts left unread)."""
        text = "\n".join(self.lines[node.lineno - 1:node.end_lineno or node.lineno])
        called = set(_CALLED.findall(text))
        params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
        return bool(_EFFECT.search(text) or params & called and _calls_argument(text, params & called)
                    or not called.isdisjoint(self.defined) or not called.isdisjoint(methods)
                    or _may_derive(text) or _number_return(text)
                    or not node.name.startswith("__") and may_flow(text, params)
                    or not methods and SCHEDULE_TEXT.search(text) is not None)

    def function(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        if self.kinds.get(name, "def") != "def" and len(self.defined[name]) == 1:
            return None  # a class, not parsed for that
        node = self._node(name)
        return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None

    def get(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:  # as a dict of the functions
        return self.function(name)

    def cls(self, name: str) -> ast.ClassDef | None:
        if self.kinds.get(name, "class") != "class" and len(self.defined[name]) == 1:
            return None
        node = self._node(name)
        return node if isinstance(node, ast.ClassDef) else None

    def classes_defining(self, method: str) -> list[ast.ClassDef]:
        """The classes that may define ``method``: those an indented ``def method`` follows, with no
        other top-level definition in between."""
        starts = [line for line, _ in self.definitions]
        owners: dict[str, None] = {}
        pattern = re.compile(r"def\s+%s\b" % re.escape(method))  # a literal start: searched fast
        text = self.source
        line, offset = 0, 0
        for match in pattern.finditer(text):
            # an indented `def method` or `async def method`
            indent = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
            if not (indent[:1] in (" ", "\t") and indent[-1] in (" ", "\t") and (
                    indent.isspace() or indent.split() == ["async"])):
                continue
            line += text.count("\n", offset, match.start())
            offset = match.start()
            at = bisect.bisect_right(starts, line) - 1
            if at >= 0:
                owner = self.definitions[at][1]
                if not all(sure for _, _, sure in self.defined[owner]):
                    raise _Whole
                if self.kinds[owner] == "class":
                    owners[owner] = None
        return [cls for owner in owners if (cls := self.cls(owner)) is not None]

    def _node(self, name: str) -> ast.stmt | None:
        if name not in self._parsed:
            places = self.defined.get(name, [])
            if len(places) > 1 or places and not places[0][2]:
                raise _Whole  # defined twice (which one counts is the whole module's to say), or maybe in a string
            self._parsed[name] = self._parse(name, *places[0][:2]) if places else None
        return self._parsed[name]

    def _parse(self, name: str, first: int, definition: int) -> ast.stmt:
        end = self.ends[definition]
        for _ in range(_MAX_GROWTH):
            text = "\n" * first + "\n".join(self.lines[first:end])  # the blank lines keep line numbers
            try:
                tree = ast.parse(text)
            except SyntaxError:
                if end >= len(self.lines):
                    break
                end = self.ends[end]
                continue
            except (ValueError, RecursionError, MemoryError):
                break
            if len(tree.body) == 1 and getattr(tree.body[0], "name", None) == name and isinstance(
                    tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return tree.body[0]
            break
        raise _Whole


_CALLED = Pattern(r"\b([A-Za-z_]\w*)\s*\(")


def import_table(statements: Iterable[ast.AST]) -> dict[str, tuple[str, str, int]]:
    """The names these statements import: ``import a.b`` -> ``{"a": ("a", "", 0)}``, ``import a.b as c``
    -> ``{"c": ("a.b", "", 0)}``, ``from .m import N as n`` -> ``{"n": ("m", "N", 1)}`` (star imports left out)."""
    table: dict[str, tuple[str, str, int]] = {}
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                table[local] = (alias.name if alias.asname else local, "", 0)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    table[alias.asname or alias.name] = (node.module or "", alias.name, node.level)
    return table


def _counts_to_a_parameter(tree: ast.Module, source: str) -> bool:
    """A modulus that is a parameter of a function or method of the module with an inert default
    (``def fit(..., acc_steps=1)`` and ``(step + 1) % acc_steps``), or Accelerate's count so given
    (``Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)``): a caller of the
    project may set it."""
    names = {m.group(1) for m in _MODULUS_NAME.finditer(source)}
    if "Accelerator" in source and "gradient_accumulation_steps" in source:  # (a substring test is cheaper)
        names |= {m.group(1) for m in _ACCELERATE_COUNT.finditer(source)}
    if not names:
        return False
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    functions += [m for c in tree.body if isinstance(c, ast.ClassDef)
                  for m in c.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        args = function.args
        positional = [*args.posonlyargs, *args.args]
        for arg, default in [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
                             *zip(args.kwonlyargs, args.kw_defaults)]:
            if arg.arg in names and isinstance(default, ast.Constant) and default.value in (0, 1, None, False):
                return True
    return False


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, with those of its top-level ``if`` / ``try`` blocks."""
    found: list[ast.stmt] = []
    for node in tree.body:
        found.append(node)
        if type(node) is ast.If or type(node) is ast.Try:
            for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))):
                found.extend(block)
    return found


def _statements(tree: ast.Module) -> list[ast.AST]:
    """Every statement of the module, nested blocks included, without descending into expressions,
    in ``ast.walk``'s order (a name imported twice keeps the binding ``ast.walk`` sees last)."""
    found: list[ast.AST] = []
    todo: deque[ast.AST] = deque(tree.body)
    while todo:
        node = todo.popleft()
        found.append(node)
        for name in _BLOCK_FIELDS.get(type(node), ()):  # a simple statement holds no statements
            block = getattr(node, name, None)
            if isinstance(block, list):
                todo.extend(b for b in block if isinstance(b, (ast.stmt, ast.excepthandler, ast.match_case)))
    return found


# The fields that may hold statements, of each node type that has some, in the node's field order.
_BLOCK_FIELDS = {kind: tuple(f for f in kind._fields if f in ("body", "orelse", "finalbody", "handlers", "cases"))
                 for kind in (getattr(ast, name) for name in dir(ast)) if isinstance(kind, type)
                 and issubclass(kind, ast.AST) and {"body", "orelse", "finalbody", "handlers", "cases"} & set(kind._fields)}


def _returns_ddp(tree: ast.Module, ddp_lines: list[int]) -> tuple[str, ...]:
    """The top-level functions of ``tree`` that return a DDP wrapper they build: ``return DDP(m)``, or
    a local bound to one returned alone or in a tuple (``Dis = DDP(Dis)`` ... ``return Gen, Dis``).
    ``ddp_lines``: where the module calls DDP (a function without one is not read)."""
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(
                node.lineno <= line <= (node.end_lineno or node.lineno) for line in ddp_lines):
            continue
        nodes = own_nodes(node)
        wrapped = {t.id for n in nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                   and last_name(n.value.func) in _DDP for t in n.targets if isinstance(t, ast.Name)}
        for sub in nodes:
            if not isinstance(sub, ast.Return) or sub.value is None:
                continue
            values = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]
            if any(isinstance(v, ast.Name) and v.id in wrapped or isinstance(v, ast.Call)
                   and last_name(v.func) in _DDP for v in values):
                found.append(node.name)
                break
    return tuple(found)


def _returned_calls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The callees (dotted names) whose call's result ``function`` returns: ``return f(x)``, or a name
    bound to ``f(x)`` anywhere in it, alone or in a tuple (``m = f(m)`` ... ``return m, opt``)."""
    statements = _statements(function)  # type: ignore[arg-type]
    bound: dict[str, set[str]] = {}  # a name -> the callees of the calls bound to it
    for st in statements:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and (callee := ast_dotted(st.value.func)):
            for target in st.targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        bound.setdefault(n.id, set()).add(callee)
    found: set[str] = set()
    for st in statements:
        if isinstance(st, ast.Return) and st.value is not None:
            for v in st.value.elts if isinstance(st.value, ast.Tuple) else [st.value]:
                if isinstance(v, ast.Name):
                    found |= bound.get(v.id, set())
                elif isinstance(v, ast.Call) and (callee := ast_dotted(v.func)):
                    found.add(callee)
    return found


def _passes_ddp(nodes: list[ast.AST], imports: dict[str, tuple[str, str, int]]) -> tuple[tuple[str, str], ...]:
    """(method, keyword or position) of each ``obj.method(...)`` call handed the DDP wrapper the module
    builds: a name or attribute bound to ``DDP(...)``, or a property returning one (``self.model``).
    Calls on ``self``/``cls`` (the module's own methods) and on imported names (``torch.save``) are
    left out: they do not run another project file's code through an object. ``nodes``: those of the
    module, in ``ast.walk``'s order."""
    wrapped: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and last_name(node.value.func) in _DDP:
            wrapped.update(name for t in node.targets if (name := ast_dotted(t)) is not None)
    if not wrapped:
        return ()
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        last_name(d) == "property" for d in member.decorator_list) and any(
                        isinstance(r, ast.Return) and r.value is not None and ast_dotted(r.value) in wrapped
                        for r in own_nodes(member)):
                    wrapped.add(f"self.{member.name}")
    found: set[tuple[str, str]] = set()
    for node in nodes:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = ast_dotted(node.func.value)
        if owner is None or owner in ("self", "cls") or owner.split(".", 1)[0] in imports:
            continue
        found.update((node.func.attr, str(i)) for i, a in enumerate(node.args) if ast_dotted(a) in wrapped)
        found.update((node.func.attr, k.arg) for k in node.keywords if k.arg and ast_dotted(k.value) in wrapped)
    return tuple(sorted(found))


def _with_effects(tree: ast.Module, source: str) -> set[ast.AST]:
    """The functions and methods worth reading: their text shows an effect a training loop can use,
    or a call of one of their own arguments (what a graph they return comes from), or they call (by
    name) a function that does. The others are never traversed: their facts would be empty."""
    lines = source.splitlines()
    functions: list[tuple[ast.AST, str, set[str]]] = []
    wanted: set[ast.AST] = set()
    local: set[ast.AST] = set()  # read for facts that do not pass to their callers (derived, builds)
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                text = "\n".join(lines[member.lineno - 1:member.end_lineno or member.lineno])
                called = set(_CALLED.findall(text))
                params = {a.arg for a in [*member.args.posonlyargs, *member.args.args, *member.args.kwonlyargs]}
                if _EFFECT.search(text) or params & called and _calls_argument(text, params & called):
                    wanted.add(member)
                elif _may_derive(text) or _number_return(text) \
                        or called & classes and _may_build(text, classes) \
                        or not member.name.startswith("__") and may_flow(text, params) \
                        or member is node and SCHEDULE_TEXT.search(text):
                    local.add(member)
                functions.append((member, member.name, called))
    names = {name for node, name, _ in functions if node in wanted}
    grown = True
    while grown:
        grown = False
        for node, name, called in functions:
            if node not in wanted and called & names:
                wanted.add(node)
                names.add(name)
                grown = True
    return wanted | local


def _calls_argument(text: str, names: set[str]) -> bool:
    """``model(x)`` for an argument ``model`` (not ``self.model(x)``)."""
    return re.search(r"(?<![\w.])(?:%s)\s*\(" % "|".join(sorted(names)), text) is not None


def ast_dotted(expr: ast.expr) -> str | None:
    """``self.scaler`` for an Attribute chain of Names, ``None`` for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = ast_dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _state_initialising(nodes: list[ast.AST]) -> set[int]:
    """The calls in the body of an ``if`` that holds only while an optimizer has no state (``if
    len(state_dict["state"]) == 0:``): the step there creates the state (loopcheck.project.state_init)."""
    return {id(call) for sub in nodes if isinstance(sub, ast.If) and empty_state_test(ast.unparse(sub.test))
            for stmt in sub.body for call in walk(stmt) if isinstance(call, ast.Call)}


def _names(expr: ast.AST) -> set[str]:
    return {n.id for n in walk(expr) if isinstance(n, ast.Name)}


class _Reader:
    def __init__(self, tree: ast.Module | _Blocks) -> None:
        self.module_functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | _Blocks = tree if isinstance(
            tree, _Blocks) else {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        # A function is read once per depth: helpers call each other, and reading a callee again at
        # every call site multiplied the work (the facts are the same each time).
        self._read: dict[tuple[int, bool, int], FunctionFacts] = {}
        self._nodes: dict[int, list[ast.AST]] = {}  # id(function) -> its own nodes (the tree keeps them alive)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                 methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None, depth: int = 0) -> FunctionFacts:
        key = (id(node), methods is None, depth)
        if key not in self._read:
            self._read[key] = self._function(node, methods, depth)
        return self._read[key]

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                  methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None, depth: int) -> FunctionFacts:
        args = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        if methods is not None and args and args[0] in ("self", "cls"):
            args = args[1:]
        index = {name: i for i, name in enumerate(args)}
        backward: int | None = None
        steps: set[int] = set()
        # (scaler, optimizer argument) -> the scaler as written here ("": already updated by a callee)
        scaled: dict[tuple[int | str, int], str] = {}
        updated: set[str] = set()  # receivers of `.update()` (a scaler's, among others)
        zeroes = controls_sync = clips = unscales = False
        own_backward = own_step = False  # a `.backward()`, an optimizer's or a scaler's `.step(...)`, of anything
        self_unscaled: set[int] = set()  # optimizer arguments its own `self.unscale_(optimizer)` unscales (a scaler's)
        modes: dict[int, bool] = {}  # argument -> in train mode after its last mode switch
        gated_evals: dict[int, tuple[int, bool]] = {}  # argument -> the parameter test its eval() runs under
        switched_on: dict[int, int] = {}  # argument -> line of its first switch into train mode
        updating: list[int] = []  # lines of the backward passes and steps, its own or a callee's
        nodes = self._nodes.get(id(node))
        if nodes is None:
            nodes = self._nodes[id(node)] = own_nodes(node)
        # `model = deepcopy(model)`: the mode switches that follow act on a copy
        copied = {t.id for sub in nodes if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call)
                  and last_name(sub.value.func) in ("deepcopy", "copy") for t in sub.targets if isinstance(t, ast.Name)}
        unpacked: set[int] | None = None  # calls whose result is unpacked or indexed, found on the first `step`
        initialising: set[int] | None = None  # calls under a test that the optimizer has no state yet
        for sub in nodes:
            if isinstance(sub, ast.Attribute) and sub.attr in _SYNC:
                controls_sync = True
            elif isinstance(sub, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "grad" for t in sub.targets) and isinstance(
                    sub.value, ast.Constant) and sub.value.value is None:
                zeroes = zeroes or not _selective(nodes, sub, methods)
            if not isinstance(sub, ast.Call):
                continue
            func = sub.func
            name = last_name(func)
            receiver = func.value if isinstance(func, ast.Attribute) else None
            recv = receiver.id if isinstance(receiver, ast.Name) else None
            if name in ("backward", "step") and receiver is not None:
                updating.append(sub.lineno)
                if name == "backward":
                    own_backward = True
                elif _scaler_step(receiver, sub) or "opt" in (last_name(receiver) or "").lower():
                    own_step = True
            if name == "backward" and receiver is not None and backward is None:
                used = [index[n] for n in _names(receiver) if n in index]
                if len(used) == 1:
                    backward = used[0]
            elif name == "step" and receiver is not None and _scaler_step(receiver, sub):
                # `scaler.step(opt)` steps `opt`, never the scaler (which may be an argument: returnn's
                # `Updater.step(grad_scaler=...)` calls `grad_scaler.step(self.optimizer)`); an optimizer
                # that is not an argument (`self.optimizer`) is one the caller cannot name
                optimizer, written = sub.args[0], ast_dotted(receiver)
                scaler = index[recv] if recv in index else written
                if isinstance(optimizer, ast.Name) and optimizer.id in index and scaler is not None and written:
                    scaled[(scaler, index[optimizer.id])] = written
            elif name == "step" and recv in index:
                if unpacked is None:
                    unpacked = unpacked_results(nodes)
                if initialising is None:
                    initialising = _state_initialising(nodes)
                if not not_an_optimizer_step(sub, recv, unpacked) and id(sub) not in initialising:
                    steps.add(index[recv])  # not `obs, r, done, info = env.step(action)`, nor a state initialisation
            elif name == "update" and receiver is not None and not sub.args and (written := ast_dotted(receiver)):
                updated.add(written)
            elif "zero_grad" in name:
                zeroes = zeroes or not _own_optimizer_step(receiver, nodes, methods)
            elif name == "zero_" and isinstance(receiver, ast.Attribute) and receiver.attr == "grad":
                zeroes = zeroes or not _selective(nodes, sub, methods)
            elif name in _CLIPS or name == "clamp_" and _is_grad(receiver) or name == "mul_" and _norm_scaled(
                    sub, receiver, nodes):
                clips = True
            elif name == "unscale_":
                unscales = True
                if recv == "self" and sub.args and isinstance(sub.args[0], ast.Name) and sub.args[0].id in index:
                    self_unscaled.add(index[sub.args[0].id])
            elif name in ("eval", "train") and recv in index and recv not in copied:
                mode = sub.args[0] if sub.args else next((k.value for k in sub.keywords if k.arg == "mode"), None)
                off = name == "eval" or isinstance(mode, ast.Constant) and mode.value is False
                modes[index[recv]] = not off
                gate = _parameter_gate(node, sub, index) if off else None
                if gate is not None:
                    gated_evals[index[recv]] = gate
                else:
                    gated_evals.pop(index[recv], None)
                if not off:
                    switched_on[index[recv]] = min(sub.lineno, switched_on.get(index[recv], sub.lineno))
            if depth < _MAX_DEPTH:
                callee = self._callee(sub, methods)
                if callee is not None and callee is not node:
                    inner = self.function(callee, methods if isinstance(func, ast.Attribute) else None, depth + 1)
                    mapping = _bind(inner, sub, index)
                    if inner.backward is not None and backward is None:
                        backward = mapping.get(inner.backward)
                    steps.update(i for s in inner.steps if (i := mapping.get(s)) is not None)
                    for scaler, opt, updates in inner.scaler_steps:
                        outer = mapping.get(scaler) if isinstance(scaler, int) else scaler
                        if outer is not None and (i := mapping.get(opt)) is not None:
                            written = args[outer] if isinstance(outer, int) else outer
                            scaled[(outer, i)] = "" if updates else written
                    zeroes = zeroes or inner.zeroes
                    clips = clips or inner.clips
                    controls_sync = controls_sync or inner.controls_sync
                    for e in inner.evals:
                        if (i := mapping.get(e)) is not None:
                            modes[i] = False
                    for t in inner.trains:
                        if (i := mapping.get(t)) is not None:
                            switched_on[i] = min(sub.lineno, switched_on.get(i, sub.lineno))
                    if inner.backward is not None or inner.steps or inner.scaler_steps:
                        updating.append(sub.lineno)
        if backward is not None:
            # one argument both back-propagated through and stepped is an engine (DeepSpeed's
            # `model.backward(loss); model.step()`), which clears its own gradients: no optimizer's step
            steps.discard(backward)
        for position in steps & self_unscaled:
            # a GradScaler subclass's own step (SAM's `scaler.first_step(optimizer)`: `self.unscale_(optimizer)`,
            # then `optimizer.step()`): the optimizer steps through the scaler it is called on
            steps.discard(position)
            scaled[("self", position)] = "self"
        return FunctionFacts(
            line=node.lineno, params=tuple(args), backward=backward, steps=tuple(sorted(steps)),
            scaler_steps=tuple((scaler, opt, not written or written in updated)
                               for (scaler, opt), written in scaled.items()),
            # a whole update of objects the caller does not hand in (DMD's critic: `fake_loss.backward();
            # clip_grad_norm_(...); ctx.fake_opt.step()`) clips before its own step, out of the caller's sight
            zeroes=zeroes,
            clips=clips and not unscales and not (own_backward and own_step and not steps and not scaled),
            evals=tuple(sorted(i for i, train in modes.items() if not train)),
            evals_unless=tuple((i, *gated_evals[i]) for i, train in sorted(modes.items()) if not train and i in gated_evals),
            trains=tuple(sorted(i for i, line in switched_on.items()
                                if (line < min(updating) if updating else modes.get(i, True)))),
            wraps_ddp=_wraps_ddp(nodes, index), controls_sync=controls_sync,
            returns_graph=_returns_graph(node, nodes, index),
            derived=_derived(nodes), builds=_builds(nodes, self.module_functions), numbers=_numbers(nodes, args),
            graph_from=graph_from(node, nodes, index),
            keeps=keeps(node, nodes, index) if methods is not None and node.args.args[:1] and node.args.args[0].arg == "self"
            and not node.name.startswith("__") else (),  # a constructor keeping its arguments is any object
            # a `*args` parameter takes the positions after it, which the caller's mapping does not know
            schedules=returned(nodes, index) if methods is None and depth == 0 and node.args.vararg is None else (),
            schedules_at=returned_in_tuples(nodes, index)
            if methods is None and depth == 0 and node.args.vararg is None else (),
            **(self._own_facts(node, nodes, methods, index, depth)
               if methods is not None and node.args.args[:1] and node.args.args[0].arg == "self" else {}),
        )

    def _own_facts(self, node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
                   methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], index: dict[str, int],
                   depth: int) -> dict[str, object]:
        own, partial, placed = self._own_effects(node, nodes, methods, index, depth)
        if not placed:
            return {"own": own, "own_partial": partial}
        gated = gated_effects(node, index, lambda call: self._own_callee(call, node, methods, depth))
        return {"own": own, "own_partial": True, "gated": gated or ()}

    def _own_effects(self, node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
                     methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], index: dict[str, int],
                     depth: int) -> tuple[tuple[tuple[str, str, str], ...], bool, bool]:
        """``own_effects`` of a method (``self`` its first parameter)."""
        return own_effects(node, nodes, index, lambda call: self._own_callee(call, node, methods, depth))

    def _own_callee(self, call: ast.Call, node: ast.FunctionDef | ast.AsyncFunctionDef,
                    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], depth: int) -> FunctionFacts | None:
        found = self._callee(call, methods) if depth < _MAX_DEPTH else None
        if found is None or found is node or not isinstance(call.func, ast.Attribute):
            return None
        return self.function(found, methods, depth + 1)

    def _callee(self, call: ast.Call, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None
                ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        func = call.func
        if isinstance(func, ast.Name):
            return self.module_functions.get(func.id)
        if methods is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self":
            return methods.get(func.attr)
        return None


# An attribute that holds an optimizer, by its name (`self.optimizer`, `self.opt_g`, `self.g_optim`)
_OPTIMIZER_NAME = Pattern(r"optimi[sz]er|(?:^|_)optim?(?:$|_|\d)", re.I)
# Calls that never zero or step what they are handed
_INERT = {"print", "len", "isinstance", "getattr", "hasattr", "setattr", "str", "int", "float", "format",
          "clip_grad_norm_", "clip_grad_value_", "unscale_", "info", "debug", "warning", "log", "state_dict", "param_groups"}


def own_effects(node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST], index: dict[str, int],
                callee: Callable[[ast.Call], FunctionFacts | None]
                ) -> tuple[tuple[tuple[str, str, str], ...], bool, bool]:
    """What a method does to its object's optimizers on every call, in order: zeroing
    (``self.optimizer.zero_grad()``), stepping (``self.optimizer.step()``, ``self.scaler.step(self.optimizer)``),
    updating a scaler, back-propagating an argument; each an expression statement of the body (or of a
    ``with`` block in it), or the same effects of a method of the class it calls so. ``partial``: the
    method may do more than that list says (an effect under a test or in a loop, a zeroing of
    parameters, a call of an unknown method or function handed an optimizer), so a caller abstains.
    ``callee(call)``: the facts of the class's method a call runs, if known. Third: partial only for
    where effects sit (what ``gated_effects`` may read), nothing the method may do unseen."""
    statements: list[ast.expr] = []
    todo = list(node.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            todo[:0] = stmt.body
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            statements.append(stmt.value)
    every = {id(call) for call in statements}
    found: list[tuple[str, str, str]] = []
    partial = placed = False
    for sub in nodes:
        if type(sub) is not ast.Call and type(sub) is not ast.Assign:
            continue  # the only nodes with own effects (a cheap test: most nodes are neither)
        effects, unsure = _own_effect(sub, index, callee)
        if unsure:
            partial = True
        elif effects and id(sub) not in every:
            placed = True  # under a test, in a loop, or inside an expression
        else:
            found.extend(effects)
    return tuple(found), partial or placed, placed and not partial


_Gate = tuple[str, bool, int, str]


def gated_effects(node: ast.FunctionDef | ast.AsyncFunctionDef, index: dict[str, int],
                  callee: Callable[[ast.Call], FunctionFacts | None]
                  ) -> tuple[tuple[str, str, str, tuple[_Gate, ...]], ...] | None:
    """``own_effects`` of a method whose effects run under tests of its own body: each effect with
    the tests it runs under (``if t:`` / ``else:``, and after ``if a: if b: return``, an exit with no
    else: not ``a and b``), in order. OC20's ``_backward``: zero under ``if N == 1``, backward, return
    off the boundary, ``scaler.step``/``optimizer.step`` in an if/else. None where an effect sits
    anywhere else (a loop, a ``try``, inside an expression, behind any other ``return``) or a node
    may do more than its effects say."""
    found: list[tuple[str, str, str, tuple[_Gate, ...]]] = []
    ifs = [0]

    def block(body: list[ast.stmt], gates: tuple[_Gate, ...], top: bool = False) -> bool:
        for stmt in body:
            if isinstance(stmt, ast.If):
                ifs[0] += 1
                number = ifs[0]
                exit_test = _exit_test(stmt)
                if exit_test is not None:
                    if _touches(stmt, index, callee):
                        return False
                    gates = (*gates, (exit_test, True, number, "after-exit"))
                    continue
                test = ast.unparse(stmt.test)
                if not block(stmt.body, (*gates, (test, False, number, "body"))) \
                        or stmt.orelse and not block(stmt.orelse, (*gates, (test, True, number, "orelse"))):
                    return False
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                if any(_touches(item, index, callee) for item in stmt.items) or not block(stmt.body, gates):
                    return False
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                effects, unsure = _own_effect(stmt.value, index, callee)
                if unsure or any(_touches(a, index, callee) for a in [*stmt.value.args, stmt.value.func]):
                    return False
                found.extend((*effect, gates) for effect in effects)
            elif isinstance(stmt, ast.Return):
                return top and stmt.value is None  # a plain `return` ends the body; one in a branch: unread
            elif _touches(stmt, index, callee) or any(isinstance(n, ast.Return) for n in walk(stmt)):
                return False  # an effect in a loop or a `try`, or a way out the gates cannot say
        return True

    return tuple(found) if block(node.body, (), True) and found else None


def _exit_test(stmt: ast.If) -> str | None:
    """``if a: ... return`` -> "a"; ``if a: if b: return`` (the exit ends the body, no else) -> "(a) and (b)"."""
    if stmt.orelse or not stmt.body:
        return None
    last = stmt.body[-1]
    if isinstance(last, ast.Return) and last.value is None:
        return ast.unparse(stmt.test)
    if isinstance(last, ast.If):
        inner = _exit_test(last)
        return None if inner is None else f"({ast.unparse(stmt.test)}) and ({inner})"
    return None


def _touches(tree: ast.AST, index: dict[str, int], callee: Callable[[ast.Call], FunctionFacts | None]) -> bool:
    """Whether any node under ``tree`` has an own effect or may have one."""
    for sub in walk(tree):
        if type(sub) is ast.Call or type(sub) is ast.Assign:
            effects, unsure = _own_effect(sub, index, callee)
            if effects or unsure:
                return True
    return False


def _own_effect(sub: ast.AST, index: dict[str, int], callee: Callable[[ast.Call], FunctionFacts | None]
                ) -> tuple[tuple[tuple[str, str, str], ...], bool]:
    """The own effects of one node of a method (``own_effects``), and whether it may do more than
    they say (the caller abstains then)."""
    if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in sub.targets):
        return (), True  # `p.grad = None`: whose parameters, and when, is not read here
    if not isinstance(sub, ast.Call) or not isinstance(sub.func, ast.Attribute):
        if isinstance(sub, ast.Call) and (any(_names_optimizer(a) for a in sub.args) and last_name(
                sub.func) not in _INERT or "zero_grad" in last_name(sub.func)):
            return (), True  # `reset(self.optimizer)`, `zero_grad(params)`: a function that may zero
        return (), False
    name, owner = sub.func.attr, ast_dotted(sub.func.value)
    mine = owner is not None and owner.startswith("self.")
    if name == "zero_grad" and mine:
        return (("zero", owner, ""),), False  # type: ignore[return-value]
    if "zero_grad" in name or name == "zero_":
        return (), True  # `opt.zero_grad()` of a loop variable, `p.grad.zero_()`, `self.zero_grad()`
    if name == "step" and mine and "scaler" in owner.lower() and len(sub.args) == 1 and not sub.keywords:  # type: ignore[union-attr]
        if not _names_optimizer(sub.args[0]):
            return (), False  # a scaler stepping an optimizer the caller cannot name: not one of its steps
        return (("step", ast_dotted(sub.args[0]), owner),), False  # type: ignore[return-value]
    if name == "step" and mine and _OPTIMIZER_NAME.search(owner.rsplit(".", 1)[1]):  # type: ignore[union-attr]
        if sub.args or sub.keywords:
            return (), True  # `step(closure)`: the closure back-propagates and zeroes
        return (("step", owner, ""),), False  # type: ignore[return-value]
    if name == "update" and mine and "scaler" in owner.lower() and not sub.args:  # type: ignore[union-attr]
        return (("update", owner, ""),), False  # type: ignore[return-value]
    if name == "backward":
        loss, scaler = sub.func.value, ""
        if isinstance(loss, ast.Call) and isinstance(loss.func, ast.Attribute) and loss.func.attr == "scale" \
                and len(loss.args) == 1:
            scaler, loss = ast_dotted(loss.func.value) or "", loss.args[0]
        if not isinstance(loss, ast.Name) or loss.id not in index or scaler and not scaler.startswith("self."):
            return (), True  # a loss the caller cannot name, or a backward of an engine
        return (("backward", str(index[loss.id]), scaler),), False
    if owner == "self":
        inner = callee(sub)
        if inner is None:
            # a method of a base class (unread) that may zero
            return (), bool(re.search(r"zero|step|optim|backward|grad", name))
        if inner.own_partial or any(kind == "backward" for kind, _, _ in inner.own):
            return (), True
        return inner.own, False
    if any(_names_optimizer(a) for a in sub.args) and name not in _INERT:
        return (), True  # `reset(self.optimizer)`: a function that may zero it
    return (), False


def _names_optimizer(expr: ast.expr) -> bool:
    """``self.optimizer`` (an attribute of the object named as an optimizer)."""
    name = ast_dotted(expr)
    return name is not None and name.startswith("self.") and _OPTIMIZER_NAME.search(name.rsplit(".", 1)[1]) is not None


def _scaler_step(receiver: ast.expr, call: ast.Call) -> bool:
    """``scaler.step(optimizer)`` (a GradScaler's or loss scaler's step: one argument, the optimizer),
    not ``optimizer.step(closure)``."""
    return len(call.args) == 1 and not call.keywords and "scaler" in (ast_dotted(receiver) or "").lower()


def _own_optimizer_step(receiver: ast.expr | None, nodes: list[ast.AST],
                        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None) -> bool:
    """``self.optimizer.zero_grad()`` in a method that also calls ``self.optimizer.step()``, where the
    class's ``__init__`` builds that optimizer itself (DARTS's ``Architect.step`` clears and steps an
    Adam over the architecture parameters): a whole step of the object's own optimizer, which clears
    only the gradients that optimizer holds, not those of an optimizer the caller steps. One handed to
    the constructor (``self.optimizer = optimizer``) may be the caller's own and still counts."""
    attribute = ast_dotted(receiver) if receiver is not None else None
    if methods is None or attribute is None or not attribute.startswith("self.") or attribute.count(".") != 1:
        return False
    if not any(isinstance(n, ast.Call) and last_name(n.func) == "step" and isinstance(n.func, ast.Attribute)
               and ast_dotted(n.func.value) == attribute for n in nodes):
        return False
    init = methods.get("__init__")
    built = [n.value for n in walk(init) if isinstance(n, ast.Assign)
             and any(ast_dotted(t) == attribute for t in n.targets)] if init is not None else []
    return bool(built) and all(isinstance(v, ast.Call) for v in built)


def _selective(nodes: list[ast.AST], clearing: ast.AST,
               methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None) -> bool:
    """``clearing`` (``p.grad = None``, ``p.grad.zero_()``) sits under an ``if`` that tests something
    other than a gradient: ``if "last_layer" in name:`` clears some parameters only (DINO's
    ``cancel_gradients_last_layer`` freezes a layer), which is not the zeroing of a step.
    ``if p.grad is not None:`` and ``if p.requires_grad:`` still clear every gradient. So does a
    module method that clears one of its own sub-modules (``for p in self.last_layer.parameters():``
    in a class with ``forward``: lightly's ``cancel_last_layer_gradients``); a trainer's
    ``self.model.parameters()`` is the whole model and still counts."""
    if methods is not None and "forward" in methods and any(_clears_sub_module(node, clearing) for node in nodes):
        return True
    for node in nodes:
        if isinstance(node, ast.If) and not _every_gradient(node.test) and any(n is clearing for n in walk(node)):
            return True
    return False


def _every_gradient(test: ast.expr) -> bool:
    """``p.grad is not None``, ``p.requires_grad`` (or their negations and combinations): a test every
    parameter that has a gradient passes. ``if torch.isnan(p.grad).any():`` lets through only some."""
    if isinstance(test, ast.BoolOp):
        return all(_every_gradient(value) for value in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _every_gradient(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        test = test.left
    return isinstance(test, ast.Attribute) and test.attr in ("grad", "requires_grad")


def _clears_sub_module(node: ast.AST, clearing: ast.AST) -> bool:
    """``node`` is ``for p in self.<sub>.parameters():`` around ``clearing`` of ``p.grad``."""
    if not isinstance(node, ast.For) or not isinstance(node.target, ast.Name):
        return False
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters"):
        return False
    owner = ast_dotted(it.func.value) or ""
    if not owner.startswith("self.") or not any(n is clearing for n in walk(node)):
        return False
    grads = [n for n in walk(clearing) if isinstance(n, ast.Attribute) and n.attr == "grad"]
    return any(isinstance(g.value, ast.Name) and g.value.id == node.target.id for g in grads)


def _bind(inner: FunctionFacts, call: ast.Call, index: dict[str, int]) -> dict[int, int]:
    """The callee's argument positions -> the caller's, where the caller passes its own argument."""
    mapping: dict[int, int] = {}
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Name) and arg.id in index:
            mapping[position] = index[arg.id]
    for keyword in call.keywords:
        if keyword.arg in inner.params and isinstance(keyword.value, ast.Name) and keyword.value.id in index:
            mapping[inner.params.index(keyword.arg)] = index[keyword.value.id]
    return mapping


def _wraps_ddp(nodes: list[ast.AST], index: dict[str, int]) -> bool:
    """``return DDP(model, ...)``, or ``model = DDP(model, ...)`` ... ``return model`` (``return model, optimizer``)."""
    wrapped: set[str] = set()
    for sub in nodes:
        if isinstance(sub, ast.Assign) and _is_ddp_of_argument(sub.value, index):
            wrapped.update(t.id for t in sub.targets if isinstance(t, ast.Name))
        elif isinstance(sub, ast.Return) and sub.value is not None:
            values = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]  # `return model, opt`
            if any(_is_ddp_of_argument(v, index) or isinstance(v, ast.Name) and v.id in wrapped for v in values):
                return True
    return False


def _is_ddp_of_argument(expr: ast.expr, index: dict[str, int]) -> bool:
    """``DDP(model, ...)`` or ``DDP(module=model.to(rank), ...)`` of an argument of the function."""
    if not (isinstance(expr, ast.Call) and last_name(expr.func) in _DDP):
        return False
    wrapped = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "module"), None)
    return wrapped is not None and bool(_names(wrapped) & set(index))


def _returns_graph(node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST], index: dict[str, int]) -> bool:
    """Every ``return`` hands back what calling an argument computed (``model(x)``, a criterion of
    it), not detached, and nothing runs under ``no_grad``: a loss or outputs still holding the graph."""
    if any(last_name(d.func if isinstance(d, ast.Call) else d) in _NO_GRAD for d in node.decorator_list):
        return False
    carried: set[str] = set()  # local names bound to graph-carrying values
    returns = []
    for sub in nodes:
        if isinstance(sub, ast.With) and any(
                last_name(i.context_expr.func if isinstance(i.context_expr, ast.Call) else i.context_expr) in _NO_GRAD
                for i in sub.items):
            return False
        if isinstance(sub, ast.Assign) and _carries(sub.value, index, carried):
            for target in sub.targets:
                carried.update(n.id for n in walk(target) if isinstance(n, ast.Name))
        elif isinstance(sub, ast.Return):
            returns.append(sub.value)
    return bool(returns) and all(v is not None and _carries(v, index, carried) for v in returns)


def _carries(expr: ast.expr, index: dict[str, int], carried: set[str]) -> bool:
    for sub in walk(expr):
        if isinstance(sub, ast.Call) and last_name(sub.func) in _DETACH | {"float", "int", "len", "str"}:
            return False
    for sub in walk(expr):
        if isinstance(sub, ast.Name) and sub.id in carried:
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, (ast.Name, ast.Attribute)):
            base = sub.func if isinstance(sub.func, ast.Name) else None
            if base is not None and base.id in index:
                return True  # `model(x)`: the forward of a module handed in
    return False


# `return a, b`: a tuple return of names
_RETURNS_NAMES = Pattern(r"\breturn\s+\(?\s*(\w+(?:\s*,\s*\w+)+)")
# `return Loss(cfg)` or `loss = Loss(cfg)`: a new instance of a capitalised class
_BUILT = Pattern(r"\breturn\s+([A-Z]\w*)\s*\(|\b\w+\s*=\s*([A-Z]\w*)\s*\(")


def _may_derive(text: str) -> bool:
    """The text returns a tuple of names, one of them assigned on one line that names another
    (``loss_sum = sum(loss_dict.values())`` ... ``return loss_sum, loss_dict``): ``_derived``'s
    candidates, found without parsing."""
    for match in _RETURNS_NAMES.finditer(text):
        names = {n.strip() for n in match.group(1).split(",")}
        for a in names:
            if re.search(r"\b%s\s*=[^=\n][^\n]*\b(?:%s)\b" % (a, "|".join(sorted(names - {a}))), text):
                return True
    return False


def _may_build(text: str, classes: set[str]) -> bool:
    """The text builds an instance of one of ``classes`` where ``_builds`` may find it returned."""
    return any((m.group(1) or m.group(2)) in classes for m in _BUILT.finditer(text))
# builtins that compute a value from their argument alone (`sum(list(d.values())) / len(d)`)
_PURE = {"sum", "list", "tuple", "len", "abs", "min", "max"}


def _derived(nodes: list[ast.AST]) -> tuple[tuple[int, int], ...]:
    """(a, b) for each pair of elements of a tuple return, the same in every ``return``, where
    element a is a name bound once, to an expression that reads no name but element b's (and
    builtins such as ``sum`` and ``len``): a graph element a holds can only come from element b."""
    assigned: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr | None] = []
    for sub in nodes:
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                for name in walk(target):
                    if isinstance(name, ast.Name):
                        assigned.setdefault(name.id, []).append(sub.value if target is name else None)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and isinstance(sub.target, ast.Name):
            assigned.setdefault(sub.target.id, []).append(None)
        elif isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr, ast.withitem)):
            target = sub.optional_vars if isinstance(sub, ast.withitem) else sub.target
            for name in walk(target) if target is not None else ():
                if isinstance(name, ast.Name):
                    assigned.setdefault(name.id, []).append(None)
        elif isinstance(sub, ast.Return):
            returns.append(sub.value)
    found: set[tuple[int, int]] | None = None
    for value in returns:
        if not isinstance(value, ast.Tuple) or not all(isinstance(e, ast.Name) for e in value.elts):
            return ()
        names = [e.id for e in value.elts]  # type: ignore[attr-defined]
        pairs = set()
        for a, name in enumerate(names):
            bound = assigned.get(name, [])
            if len(bound) != 1 or bound[0] is None:
                continue
            read = {n.id for n in walk(bound[0]) if isinstance(n, ast.Name)} - _PURE
            if len(read) == 1 and (source := read.pop()) in names and source != name and names.count(source) == 1:
                pairs.add((a, names.index(source)))
        found = pairs if found is None else found & pairs
    return tuple(sorted(found or ()))


# `x = loss.item()`, `float(...)`, `action.numpy()[0]`: what a tuple return may hold as a plain number
# (`_numbers`' candidates)
_NUMBER_RETURN = Pattern(r"\.(?:item|numpy|tolist)\(\)|\b(?:float|int)\(")
_NUMBER_CALLS = {"float", "int", "len", "round"}
# `return action.numpy()[0], v, log_prob, hx`: a tuple return whose elements are not all names
_RETURNS_CONVERTED = Pattern(r"\breturn\b(?=[^\n#]*,)[^\n#]*\.(?:item|numpy|tolist)\(\)")


# `return loss + aux, loss_dict`: a tuple return whose last element is a name
_RETURNS_LAST_NAME = Pattern(r"\breturn\b[^\n#]*,[ \t]*\w+[ \t]*$", re.M)


def _number_return(text: str) -> bool:
    """The function's text may return a tuple holding a plain number (``_numbers`` reads it)."""
    return _NUMBER_RETURN.search(text) is not None and (
        _RETURNS_NAMES.search(text) is not None or _RETURNS_CONVERTED.search(text) is not None
        or _RETURNS_LAST_NAME.search(text) is not None)


def _is_number(expr: ast.expr | None) -> bool:
    """A number literal, ``x.item()``, ``float(x)``, ``int(x)``, ``len(x)``, ``round(x)``, or a
    NumPy value or Python list taken from a tensor (``action.numpy()[0]``, ``x.tolist()``: they
    hold no graph, and ``.numpy()`` refuses a tensor that requires grad)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Dict):  # `{"rec_loss": loss.item(), ...}`: a log of numbers
        return bool(expr.values) and all(_is_number(v) for v in expr.values)
    if isinstance(expr, ast.Subscript):
        expr = expr.value
        return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in ("numpy", "tolist") and not expr.args
    if isinstance(expr, ast.Call):
        func = expr.func
        return (isinstance(func, ast.Attribute) and func.attr in ("item", "numpy", "tolist") and not expr.args) or (
            isinstance(func, ast.Name) and func.id in _NUMBER_CALLS)
    return False


def _numbers(nodes: list[ast.AST], params: list[str], depth: int = 0) -> tuple[int, ...]:
    """The elements of a tuple return, the same in every ``return``, that are a number, or a name
    whose every binding in the function is one (``a, b = 0, 0`` binds each to its own element; a count
    ``hits = 0`` ... ``hits += 1``): a model's forward handing back a logged value (``dual_loss =
    lm_loss.item()``) next to its loss. ``return bert_out()`` of a function defined in the body
    returns what that function does."""
    bound: dict[str, list[ast.expr | None]] = {name: [None] for name in params}
    returns: list[ast.expr | None] = []
    nested = {n.name: n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for sub in nodes:
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                values = sub.value.elts if isinstance(sub.value, (ast.Tuple, ast.List)) and isinstance(
                    target, (ast.Tuple, ast.List)) and len(sub.value.elts) == len(elements) else None
                for i, element in enumerate(elements):
                    value = sub.value if element is target else (values[i] if values is not None else None)
                    for name in walk(element):
                        if isinstance(name, ast.Name):
                            bound.setdefault(name.id, []).append(value if name is element else None)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and isinstance(sub.target, ast.Name):
            counted = isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Add, ast.Sub)) \
                and _is_number(sub.value)
            bound.setdefault(sub.target.id, []).append(
                sub.value if isinstance(sub, ast.AnnAssign) or counted else None)
        elif isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr, ast.withitem)):
            target = sub.optional_vars if isinstance(sub, ast.withitem) else sub.target
            for name in walk(target) if target is not None else ():
                if isinstance(name, ast.Name):
                    bound.setdefault(name.id, []).append(None)
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            for name in sub.names:
                bound.setdefault(name, []).append(None)
        elif isinstance(sub, ast.Return):
            returns.append(sub.value)
    found: set[int] | None = None
    for value in returns:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in nested \
                and depth < 2:
            inner = nested[value.func.id]
            numbers = set(_numbers(own_nodes(inner), [a.arg for a in inner.args.args], depth + 1))
            found = numbers if found is None else found & numbers
            continue
        if not isinstance(value, ast.Tuple):
            return ()
        numbers = {i for i, e in enumerate(value.elts) if _is_number(e) or isinstance(e, ast.Name) and bound.get(
            e.id) and all(_is_number(v) for v in bound[e.id])}
        found = numbers if found is None else found & numbers
    return tuple(sorted(found or ()))


def _builds(nodes: list[ast.AST], functions: object) -> str:
    """The class a factory returns a new instance of: ``return Loss(cfg)``, or ``loss = Loss(cfg)``
    ... ``return loss`` (the class is a capitalised name: one of its own module's, resolved there)."""
    built: dict[str, str] = {}
    returned: set[str] = set()
    for sub in nodes:
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            name = sub.targets[0].id
            built[name] = sub.value.func.id if isinstance(sub.value, ast.Call) and isinstance(
                sub.value.func, ast.Name) and sub.value.func.id[:1].isupper() and name not in built else ""
        elif isinstance(sub, ast.Return):
            value = sub.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id[:1].isupper():
                returned.add(value.func.id)
            elif isinstance(value, ast.Name) and built.get(value.id):
                returned.add(built[value.id])
            else:
                return ""
    return returned.pop() if len(returned) == 1 else ""
