"""Small, fast helpers over libcst nodes.

libcst's own ``visit`` rebuilds every node it passes (a full copy per traversal); these helpers
only read dataclass fields, which is several times cheaper on the files we look at.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Callable, Iterator

import libcst as cst

from loopcheck.model.from_ast import text as built_text
from loopcheck.patterns import Pattern

# Fields that hold only whitespace, brackets or punctuation: never a call or a name.
_SKIP_FIELD = ("whitespace", "lpar", "rpar", "comma", "semicolon", "colon", "newline", "leading_lines",
               "header", "footer", "lines_after_decorators", "equal", "star", "dot", "lbracket",
               "rbracket", "lbrace", "rbrace", "operator", "asynchronous", "first_line", "indent",
               "trailing_whitespace")
# Fields typed as text or flags (``Name.value``, ``Arg.star``): never a node.
_NEVER_NODES = (str, bool)
# libcst node classes are ABCs, and isinstance() against an ABC is slow; the walkers below run
# over every node of a file, so they test `type(x)` against these tables instead (type -> whether a
# value of that type is returned), filled on first sight of each type.
_IS_NODE: dict[type, bool] = {}
_IS_INNER: dict[type, bool] = {}  # a node with children left to visit (see _LEAVES)
# per node type: its children, or its inner nodes (a function generated for that type's fields)
_CHILDREN: dict[type, Callable[[cst.CSTNode], list[cst.CSTNode]]] = {}
_INNER: dict[type, Callable[[cst.CSTNode], list[cst.CSTNode]]] = {}


def is_node(value: object) -> bool:
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def _learn(table: dict[type, bool], kind: type) -> bool:
    found = table[kind] = issubclass(kind, cst.CSTNode) and (table is _IS_NODE or kind not in _LEAVES)
    return found


# Calls of a type's plain lister before its generated one is compiled (~0.4 ms a type): most of
# the ~100 types a file holds are met a few times only, compiling all of them cost ~45 ms a process.
_COMPILE_AFTER = 256


def _lister(node_type: type, table: dict[type, bool],
            listers: dict[type, Callable[[cst.CSTNode], list[cst.CSTNode]]]) -> Callable[[cst.CSTNode], list[cst.CSTNode]]:
    """A function listing the values of ``node_type``'s fields (sequences flattened, in field order)
    whose type ``table`` accepts: first one reading the fields by ``attrgetter``, replaced in
    ``listers`` by code generated for the type (one attribute read per field, ~25% faster a call)
    once the type is met often, since the walks call it for every node of a file."""
    names = [f.name for f in dataclasses.fields(node_type)
             if not f.name.startswith(_SKIP_FIELD) and f.type not in _NEVER_NODES
             and typing.get_origin(f.type) is not typing.Literal]
    if not names:
        return _nothing
    read = operator.attrgetter(*names)
    single = len(names) == 1
    get, learn = table.get, _learn
    left = [_COMPILE_AFTER]

    def listed(node: cst.CSTNode) -> list[cst.CSTNode]:
        left[0] -= 1
        if not left[0]:
            listers[node_type] = _generated(names, table)
        found = []
        for value in ((read(node),) if single else read(node)):
            kind = type(value)
            if kind is tuple or kind is list:
                for item in value:
                    ok = get(type(item))
                    if ok or ok is None and learn(table, type(item)):
                        found.append(item)
            else:
                ok = get(kind)
                if ok or ok is None and learn(table, kind):
                    found.append(value)
        return found

    return listed


def _nothing(node: cst.CSTNode) -> list[cst.CSTNode]:
    return []


def _generated(names: list[str], table: dict[type, bool]) -> Callable[[cst.CSTNode], list[cst.CSTNode]]:
    """The lister of ``_lister`` as code generated for these field names."""
    lines = ["def listed(node):", "    found = []"]
    for name in names:
        lines += [f"    value = node.{name}",
                  "    kind = type(value)",
                  "    if kind is tuple or kind is list:",
                  "        for item in value:",
                  "            ok = table.get(type(item))",
                  "            if ok or ok is None and learn(table, type(item)):",
                  "                found.append(item)",
                  "    else:",
                  "        ok = table.get(kind)",
                  "        if ok or ok is None and learn(table, kind):",
                  "            found.append(value)"]
    lines.append("    return found")
    scope = {"table": table, "learn": _learn}
    exec("\n".join(lines), scope)  # noqa: S102  (the code above, from dataclass field names)
    return scope["listed"]  # type: ignore[no-any-return]


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    listed = _CHILDREN.get(type(node))
    if listed is None:
        listed = _CHILDREN[type(node)] = _lister(type(node), _IS_NODE, _CHILDREN)
    return listed(node)


_SCOPES = (cst.Lambda, cst.FunctionDef, cst.ClassDef)


def walk(node: cst.CSTNode, *, into_functions: bool = False) -> Iterator[cst.CSTNode]:
    """Pre-order walk of ``node`` and its descendants (lambdas and nested defs skipped)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and not into_functions and type(current) in _SCOPES:
            continue
        stack.extend(children(current)[::-1])


# Nodes with no child left to visit once the fields above are skipped: the walkers that look only
# for larger nodes (calls, assignments) never push them. A third of a module's nodes are names.
_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedStringText,
                     cst.Ellipsis, cst.Pass, cst.Break, cst.Continue})


def inner_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``children(node)`` less the leaves."""
    listed = _INNER.get(type(node))
    if listed is None:
        listed = _INNER[type(node)] = _lister(type(node), _IS_INNER, _INNER)
    return listed(node)


def calls(node: cst.CSTNode) -> list[cst.Call]:
    """The calls in ``node`` (itself included) in ``walk`` order: lambdas and nested defs skipped."""
    found: list[cst.Call] = []
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Call:
            found.append(current)  # type: ignore[arg-type]
        elif current is not node and kind in _SCOPES:
            continue
        stack.extend(inner_nodes(current)[::-1])
    return found


def dotted(expr: cst.BaseExpression | None) -> str | None:
    """``self.optimizer`` for an Attribute chain of Names, ``None`` for anything else."""
    kind = type(expr)
    if kind is cst.Name:
        return expr.value  # type: ignore[union-attr]
    if kind is not cst.Attribute:
        return None
    parts = []
    while kind is cst.Attribute:
        parts.append(expr.attr.value)  # type: ignore[union-attr]
        expr = expr.value  # type: ignore[union-attr]
        kind = type(expr)
    if kind is not cst.Name:
        return None
    parts.append(expr.value)  # type: ignore[union-attr]
    return ".".join(reversed(parts))


_EMPTY = cst.Module(body=[])


def source(node: cst.CSTNode) -> str:
    """The code of one node: its text in the file for a tree built from ``ast``, else libcst's."""
    text = built_text(node)
    if text is not None:
        return text
    try:
        return _EMPTY.code_for_node(node)
    except AttributeError:  # a node the model composed around nodes of a built tree
        return _composed(node)


def call_text(node: cst.CSTNode) -> str:
    """``source(node)``, or ``fn(...)`` for a call written over several lines (as a message quotes it)."""
    text = source(node)
    return f"{source(node.func)}(...)" if "\n" in text and isinstance(node, cst.Call) else text


_COMPARISON_TOKENS = {cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
                      cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.Is: "is", cst.IsNot: "is not",
                      cst.In: "in", cst.NotIn: "not in"}


def _composed(node: cst.CSTNode) -> str:
    """The code libcst writes for a new ``len(x)`` or ``a * b`` (no whitespace of their own) whose
    parts come from a tree built from ``ast`` (which libcst cannot write)."""
    kind = type(node)
    if kind is cst.Call:
        return f"{source(node.func)}({', '.join(_argument(a) for a in node.args)})"  # type: ignore[attr-defined]
    if kind is cst.BinaryOperation:
        return f"{source(node.left)} {node.operator._get_token()} {source(node.right)}"  # type: ignore[attr-defined]
    if kind is cst.BooleanOperation:
        left, right = node.left, node.right  # type: ignore[attr-defined]
        return f"{_operand(left)} {node.operator._get_token()} {_operand(right)}"  # type: ignore[attr-defined]
    if kind is cst.Comparison:  # `n <= 1` with `n` bound to a predicate's argument
        parts = [_operand(node.left)]  # type: ignore[attr-defined]
        for target in node.comparisons:  # type: ignore[attr-defined]
            parts += [_COMPARISON_TOKENS[type(target.operator)], _operand(target.comparator)]
        return " ".join(parts)
    if kind is cst.Attribute:
        return f"{source(node.value)}.{node.attr.value}"  # type: ignore[attr-defined]
    if kind is cst.UnaryOperation:
        operand = node.expression  # type: ignore[attr-defined]
        loose = isinstance(operand, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr))
        token = node.operator._get_token()  # type: ignore[attr-defined]
        return f"{token} ({source(operand)})" if loose else f"{token} {source(operand)}"
    if kind is cst.List:  # the lengths a schedule function is given, listed
        return f"[{', '.join(source(e.value) for e in node.elements)}]"  # type: ignore[attr-defined]
    raise TypeError(f"no code for a composed {kind.__name__}")


def _operand(expr: cst.BaseExpression) -> str:
    """An operand of a composed ``and``, bracketed where it binds less tightly (``a or b``)."""
    loose = isinstance(expr, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr))
    return f"({source(expr)})" if loose else source(expr)


def _argument(arg: cst.Arg) -> str:
    keyword = f"{arg.keyword.value}=" if arg.keyword is not None else ""
    return f"{keyword}{arg.star if isinstance(arg.star, str) else ''}{source(arg.value)}"


def receiver(expr: cst.BaseExpression) -> str:
    """A stable text for the object a method is called on: ``optimizers[0]``, ``self.opt``."""
    return dotted(expr) or source(expr)


def last_part(name: str) -> str:
    """``self.lr_scheduler`` -> ``lr_scheduler``; ``opts[0]`` -> ``opts``; ``self.actor[i].optimizer``
    -> ``optimizer``."""
    if "[" in name:
        while "[" in name:
            unbracketed = _INDEXED.sub("", name)
            if unbracketed == name:
                break  # (unbalanced: what is left before the first bracket)
            name = unbracketed
        name = name.split("[", 1)[0]
    return name.rsplit(".", 1)[-1]


_INDEXED = Pattern(r"\[[^\[\]]*\]")


def func_name(call: cst.Call) -> str | None:
    """Dotted name of what is called (``torch.nn.utils.clip_grad_norm_``), if it is a plain name."""
    return dotted(call.func)


def own_call_name(call: cst.Call) -> str | None:
    """The name a call may reach a function or method of the same file by: ``fn(...)`` or
    ``self.fn(...)``."""
    func = call.func
    kind = type(func)
    if kind is cst.Name:
        return func.value
    if kind is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        return func.attr.value
    return None


def method(call: cst.Call) -> tuple[cst.BaseExpression, str] | None:
    """(receiver expression, method name) for ``x.m(...)``."""
    if type(call.func) is cst.Attribute:
        return call.func.value, call.func.attr.value
    return None


def names_in(expr: cst.CSTNode) -> set[str]:
    """The names read in ``expr``, dotted chains whole: ``args.accum * i`` -> {``args.accum``, ``i``}."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        name = dotted(node) if kind is cst.Name or kind is cst.Attribute else None
        if name is not None:
            found.add(name)
            continue
        if kind is cst.Lambda or kind is cst.FunctionDef:
            continue
        stack.extend(children(node))
    return found


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def int_value(expr: cst.BaseExpression | None) -> int | None:
    kind = type(expr)
    if kind is cst.Integer:
        return int(expr.value, 0)  # type: ignore[union-attr]
    if kind is cst.UnaryOperation and type(expr.operator) is cst.Minus:  # type: ignore[union-attr]
        inner = int_value(expr.expression)
        return -inner if inner is not None else None
    return None


def is_zero(expr: cst.BaseExpression) -> bool:
    """A literal 0 (``0``, ``0.0``, ``0x0``)."""
    return isinstance(expr, (cst.Integer, cst.Float)) and expr.evaluated_value == 0


def is_none(expr: cst.BaseExpression) -> bool:
    """The name ``None``."""
    return type(expr) is cst.Name and expr.value == "None"  # type: ignore[attr-defined]


def same(a: cst.CSTNode | None, b: cst.CSTNode | None) -> bool:
    """Structural equality of two expressions, ignoring whitespace and parentheses."""
    if a is None or b is None:
        return a is b
    return source(a).replace(" ", "").strip("()") == source(b).replace(" ", "").strip("()")


def same_setting(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """The same expression, or the same configuration field read through two names for one object:
    ``cfg.trainer.max_train_steps`` where the scheduler is built and ``self.config.trainer.max_train_steps``
    in the trainer that stored ``cfg`` (the path after the root object agrees)."""
    if same(a, b):
        return True
    tails = []
    for expr in (a, b):
        name = dotted(expr) if isinstance(expr, cst.Attribute) else None
        parts = (name or "").split(".")
        parts = parts[1:] if parts[0] == "self" else parts
        tails.append(parts[1:])
    return bool(tails[0]) and tails[0] == tails[1]


def param_names(params: cst.Parameters) -> set[str]:
    """The names of a function's or lambda's parameters, positional-only and keyword-only included
    (not ``*args`` / ``**kwargs``)."""
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def target_names(target: cst.BaseAssignTargetExpression | cst.BaseExpression) -> list[str]:
    """Names bound by an assignment target: ``a``, ``self.a``, each element of ``a, (b, c)``."""
    kind = type(target)  # exact types: isinstance() on libcst's ABCs is several times slower
    if kind is cst.Tuple or kind is cst.List:
        out: list[str] = []
        for element in target.elements:  # type: ignore[union-attr]
            out.extend(target_names(element.value))
        return out
    if kind is cst.StarredElement:
        return target_names(target.value)
    name = dotted(target)
    return [name] if name else []


def lines(suite: cst.BaseSuite) -> typing.Sequence[cst.BaseStatement]:
    """The statements of a body: an indented block's, or the one line of small statements written
    after the colon (``if c: opt.step(); opt.zero_grad()``), which counts as a line of its own."""
    return suite.body if type(suite) is cst.IndentedBlock else (suite,)  # type: ignore[return-value]


def last_small(suite: cst.BaseSuite) -> cst.BaseSmallStatement | None:
    """The last small statement of a body whose last line is a simple one (``... continue``), else None."""
    last = lines(suite)[-1] if suite.body else None
    return last.body[-1] if type(last) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) else None  # type: ignore[union-attr]


EXITS = (cst.Continue, cst.Return, cst.Break)  # exact types: isinstance() on libcst's ABCs is slow


def exit_statement(node: cst.If) -> cst.BaseSmallStatement | None:
    """The ``continue``/``return``/``break`` that ends ``if t: ... continue``, or that ends the last
    ``if`` of such a body (``if a: if b: return``), with no ``else`` at any level; else None."""
    for _ in range(8):
        if node.orelse is not None or not node.body.body:
            return None
        last = last_small(node.body)
        if type(last) in EXITS:
            return last
        inner = lines(node.body)[-1]
        if type(inner) is not cst.If:
            return None
        node = inner  # type: ignore[assignment]
    return None


def conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and b and c`` -> [a, b, c]: each must hold for the branch to run."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*conjuncts(test.left), *conjuncts(test.right)]
    return [test]


def disjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a or b or c`` -> [a, b, c]: the branch runs where any holds."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return [*disjuncts(test.left), *disjuncts(test.right)]
    return [test]


def small_statements(suite: cst.BaseSuite) -> list[cst.BaseSmallStatement]:
    """The small statements of a body's lines, in order (compound statements left out)."""
    return [small for line in lines(suite) if type(line) in (cst.SimpleStatementLine, cst.SimpleStatementSuite)
            for small in line.body]  # type: ignore[attr-defined]
