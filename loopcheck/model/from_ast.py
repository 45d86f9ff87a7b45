"""libcst nodes built from Python's own ``ast``: the model of a file without libcst's parser.

libcst's parse is most of what checking a training file costs: its native parser builds about
three times as many nodes as ``ast`` (every bracket, comma and run of whitespace), each through a
validating constructor. The model reads none of that. This module builds the same libcst classes
from the ``ast`` the screen already holds, with only the fields the model reads (no whitespace,
no brackets), so the model and the rules run on it unchanged.

Such a tree is for analysis only: libcst cannot write it back as code nor compute positions on
it. The text and positions of its nodes come from the source (``text``, ``position``), as libcst
would give them; fixes are applied to libcst's own tree (``loopcheck.fixer``), and whatever this
tree cannot answer sends the file there too (``loopcheck.engine``).
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import libcst as cst

from loopcheck import dataclass_code


class Unsupported(Exception):
    """A construct this module does not build (``match``, ``except*``, type parameters): the file
    is parsed by libcst instead."""


def _setter(kind: type, name: str) -> Callable[[object, object], None]:
    for klass in kind.__mro__:
        slot = klass.__dict__.get(name)
        if slot is not None and hasattr(slot, "__set__"):
            return slot.__set__  # type: ignore[no-any-return]
    raise AttributeError(f"{kind.__name__}.{name}")


def _maker(kind: type, *names: str, **fixed: object) -> Callable[..., Any]:
    """A function building a ``kind`` from ``names`` (positional) with ``fixed`` fields set too,
    without the dataclass constructor and its validation."""
    scope: dict[str, object] = {"new": object.__new__, "kind": kind}
    lines = [f"def make({', '.join(names)}):", "    node = new(kind)"]
    for name in (*names, *fixed):
        scope[f"set_{name}"] = _setter(kind, name)
        lines.append(f"    set_{name}(node, {name if name in names else f'fixed_{name}'})")
        if name in fixed:
            scope[f"fixed_{name}"] = fixed[name]
    lines.append("    return node")
    exec(dataclass_code.code_of("\n".join(lines)), scope)  # noqa: S102  (code from the field names above)
    return scope["make"]  # type: ignore[return-value]


_Module = _maker(cst.Module, "body", "has_trailing_newline", "default_indent", "default_newline", header=(),
                 footer=(), encoding="utf-8")
_Line = _maker(cst.SimpleStatementLine, "body", leading_lines=())
_Suite = _maker(cst.SimpleStatementSuite, "body", "leading_whitespace")
_Block = _maker(cst.IndentedBlock, "body", indent=None, footer=())
_Expr = _maker(cst.Expr, "value")
_Assign = _maker(cst.Assign, "targets", "value")
_AssignTarget = _maker(cst.AssignTarget, "target")
_AugAssign = _maker(cst.AugAssign, "target", "operator", "value")
_AnnAssign = _maker(cst.AnnAssign, "target", "annotation", "value")
_Annotation = _maker(cst.Annotation, "annotation")
_Return = _maker(cst.Return, "value")
_Del = _maker(cst.Del, "target")
_Raise = _maker(cst.Raise, "exc", "cause")
_From = _maker(cst.From, "item")
_Assert = _maker(cst.Assert, "test", "msg")
_Global = _maker(cst.Global, "names")
_Nonlocal = _maker(cst.Nonlocal, "names")
_NameItem = _maker(cst.NameItem, "name")
_Import = _maker(cst.Import, "names")
_ImportFrom = _maker(cst.ImportFrom, "module", "names", "relative", lpar=None, rpar=None,
                     semicolon=cst.MaybeSentinel.DEFAULT, whitespace_after_from=cst.SimpleWhitespace(" "),
                     whitespace_before_import=cst.SimpleWhitespace(" "),
                     whitespace_after_import=cst.SimpleWhitespace(" "))
_ImportAlias = _maker(cst.ImportAlias, "name", "asname", comma=cst.MaybeSentinel.DEFAULT)
_AsName = _maker(cst.AsName, "name", whitespace_before_as=cst.SimpleWhitespace(" "),
                 whitespace_after_as=cst.SimpleWhitespace(" "))
_If = _maker(cst.If, "test", "body", "orelse", leading_lines=())
_Else = _maker(cst.Else, "body", leading_lines=())
_For = _maker(cst.For, "target", "iter", "body", "orelse", "asynchronous", leading_lines=())
_While = _maker(cst.While, "test", "body", "orelse", leading_lines=())
_With = _maker(cst.With, "items", "body", "asynchronous", leading_lines=())
_WithItem = _maker(cst.WithItem, "item", "asname")
_Try = _maker(cst.Try, "body", "handlers", "orelse", "finalbody", leading_lines=())
_ExceptHandler = _maker(cst.ExceptHandler, "body", "type", "name", leading_lines=())
_Finally = _maker(cst.Finally, "body", leading_lines=())
_FunctionDef = _maker(cst.FunctionDef, "name", "params", "body", "decorators", "returns", "asynchronous",
                      type_parameters=None, leading_lines=(), lines_after_decorators=())
_Parameters = _maker(cst.Parameters, "params", "star_arg", "kwonly_params", "star_kwarg", "posonly_params",
                     "posonly_ind")
_Param = _maker(cst.Param, "name", "annotation", "default", "star")
_Decorator = _maker(cst.Decorator, "decorator", leading_lines=())
_ClassDef = _maker(cst.ClassDef, "name", "body", "bases", "keywords", "decorators", type_parameters=None,
                   leading_lines=(), lines_after_decorators=())
_Arg = _maker(cst.Arg, "value", "keyword", "star")
_Name = _maker(cst.Name, "value")
_Attribute = _maker(cst.Attribute, "value", "attr")
# Calls and imports carry libcst's default whitespace too: a fix rebuilds them with ``with_changes``.
_Call = _maker(cst.Call, "func", "args", lpar=(), rpar=(), whitespace_after_func=cst.SimpleWhitespace(""),
               whitespace_before_args=cst.SimpleWhitespace(""))
_Subscript = _maker(cst.Subscript, "value", "slice")
_SubscriptElement = _maker(cst.SubscriptElement, "slice")
_Index = _maker(cst.Index, "value", star=None)
_Slice = _maker(cst.Slice, "lower", "upper", "step", "first_colon", "second_colon")
_BinaryOperation = _maker(cst.BinaryOperation, "left", "operator", "right")
_BooleanOperation = _maker(cst.BooleanOperation, "left", "operator", "right")
_UnaryOperation = _maker(cst.UnaryOperation, "operator", "expression")
_Comparison = _maker(cst.Comparison, "left", "comparisons")
_ComparisonTarget = _maker(cst.ComparisonTarget, "operator", "comparator")
_IfExp = _maker(cst.IfExp, "test", "body", "orelse")
_Lambda = _maker(cst.Lambda, "params", "body")
_List = _maker(cst.List, "elements")
_Tuple = _maker(cst.Tuple, "elements")
_Set = _maker(cst.Set, "elements")
_Dict = _maker(cst.Dict, "elements")
_Element = _maker(cst.Element, "value")
_StarredElement = _maker(cst.StarredElement, "value")
_DictElement = _maker(cst.DictElement, "key", "value")
_StarredDictElement = _maker(cst.StarredDictElement, "value")
_ListComp = _maker(cst.ListComp, "elt", "for_in")
_SetComp = _maker(cst.SetComp, "elt", "for_in")
_GeneratorExp = _maker(cst.GeneratorExp, "elt", "for_in")
_DictComp = _maker(cst.DictComp, "key", "value", "for_in")
_CompFor = _maker(cst.CompFor, "target", "iter", "ifs", "inner_for_in", "asynchronous")
_CompIf = _maker(cst.CompIf, "test")
_Await = _maker(cst.Await, "expression")
_Yield = _maker(cst.Yield, "value")
_NamedExpr = _maker(cst.NamedExpr, "target", "value")
_Integer = _maker(cst.Integer, "value")
_Float = _maker(cst.Float, "value")
_Imaginary = _maker(cst.Imaginary, "value")
_SimpleString = _maker(cst.SimpleString, "value")
_ConcatenatedString = _maker(cst.ConcatenatedString, "left", "right")
_FormattedString = _maker(cst.FormattedString, "parts", "start", "end")
_FormattedStringText = _maker(cst.FormattedStringText, "value")
_FormattedStringExpression = _maker(cst.FormattedStringExpression, "expression", "conversion", "format_spec")

_PASS, _BREAK, _CONTINUE, _ELLIPSIS = cst.Pass(), cst.Break(), cst.Continue(), cst.Ellipsis()
_ASYNC, _STAR, _COLON = cst.Asynchronous(), cst.ImportStar(), cst.Colon()
_BINARY = {ast.Add: cst.Add(), ast.Sub: cst.Subtract(), ast.Mult: cst.Multiply(), ast.Div: cst.Divide(),
           ast.FloorDiv: cst.FloorDivide(), ast.Mod: cst.Modulo(), ast.Pow: cst.Power(),
           ast.LShift: cst.LeftShift(), ast.RShift: cst.RightShift(), ast.BitOr: cst.BitOr(),
           ast.BitXor: cst.BitXor(), ast.BitAnd: cst.BitAnd(), ast.MatMult: cst.MatrixMultiply()}
_AUGMENTED = {ast.Add: cst.AddAssign(), ast.Sub: cst.SubtractAssign(), ast.Mult: cst.MultiplyAssign(),
              ast.Div: cst.DivideAssign(), ast.FloorDiv: cst.FloorDivideAssign(), ast.Mod: cst.ModuloAssign(),
              ast.Pow: cst.PowerAssign(), ast.LShift: cst.LeftShiftAssign(), ast.RShift: cst.RightShiftAssign(),
              ast.BitOr: cst.BitOrAssign(), ast.BitXor: cst.BitXorAssign(), ast.BitAnd: cst.BitAndAssign(),
              ast.MatMult: cst.MatrixMultiplyAssign()}
_BOOLEAN = {ast.And: cst.And(), ast.Or: cst.Or()}
_UNARY = {ast.Not: cst.Not(), ast.USub: cst.Minus(), ast.UAdd: cst.Plus(), ast.Invert: cst.BitInvert()}
_COMPARE = {ast.Eq: cst.Equal(), ast.NotEq: cst.NotEqual(), ast.Lt: cst.LessThan(), ast.LtE: cst.LessThanEqual(),
            ast.Gt: cst.GreaterThan(), ast.GtE: cst.GreaterThanEqual(), ast.Is: cst.Is(), ast.IsNot: cst.IsNot(),
            ast.In: cst.In(), ast.NotIn: cst.NotIn()}
_KEYWORDS = {True: "True", False: "False", None: "None"}
_OLD_FSTRINGS = sys.version_info < (3, 12)


class _Unclear(Unsupported):
    """Whether a text is in brackets cannot be told from the text around it alone."""


class _Builder:
    """One file's conversion; ``spans`` maps each built node's id to the node and the ``ast``
    nodes whose extent is its text (see ``text``)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.ascii = source.isascii()
        first = source.find("\n")
        self.crlf = first > 0 and source[first - 1] == "\r"  # libcst's default newline: the first line's
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line))
        self.starts = starts
        # id -> (node, first, last, indentation of its block): its text runs from the start of the
        # ``ast`` node ``first`` to the end of ``last`` (or between two offsets in the source)
        self.spans: dict[int, tuple[Any, Any, Any, str]] = {}
        self.sole: set[int] = set()  # ids of the only argument of a call or class statement
        self.bare: set[int] = set()  # ids of generator expressions in the brackets of their call
        self.indent = ""
        self.default_indent: str | None = None
        self.in_fstring = 0
        self.unplaced: set[int] = set()  # ids of nodes whose columns ``ast`` may get wrong
        self.expr: dict[type, Callable[[Any], cst.BaseExpression]] = {
            ast.Name: self.name, ast.Attribute: self.attribute, ast.Call: self.call, ast.Constant: self.constant,
            ast.Subscript: self.subscript, ast.BinOp: self.binop, ast.BoolOp: self.boolop,
            ast.UnaryOp: self.unaryop, ast.Compare: self.compare, ast.IfExp: self.ifexp, ast.Lambda: self.lambda_,
            ast.List: self.list_, ast.Tuple: self.tuple_, ast.Set: self.set_, ast.Dict: self.dict_,
            ast.ListComp: self.listcomp, ast.SetComp: self.setcomp, ast.GeneratorExp: self.genexp,
            ast.DictComp: self.dictcomp, ast.Await: self.await_, ast.Yield: self.yield_,
            ast.YieldFrom: self.yieldfrom, ast.NamedExpr: self.namedexpr, ast.JoinedStr: self.joinedstr,
            ast.Starred: self.starred, ast.Slice: self.slice_,
        }
        self.small: dict[type, Callable[[Any], cst.BaseSmallStatement]] = {
            ast.Expr: self.expr_stmt, ast.Assign: self.assign, ast.AugAssign: self.augassign,
            ast.AnnAssign: self.annassign, ast.Return: self.return_, ast.Delete: self.delete,
            ast.Pass: lambda n: _PASS, ast.Break: lambda n: _BREAK, ast.Continue: lambda n: _CONTINUE,
            ast.Raise: self.raise_, ast.Assert: self.assert_, ast.Global: self.global_,
            ast.Nonlocal: self.nonlocal_, ast.Import: self.import_, ast.ImportFrom: self.importfrom,
        }
        self.compound: dict[type, Callable[[Any], cst.BaseCompoundStatement]] = {
            ast.If: self.if_, ast.For: self.for_, ast.AsyncFor: self.for_, ast.While: self.while_,
            ast.With: self.with_, ast.AsyncWith: self.with_, ast.Try: self.try_,
            ast.FunctionDef: self.functiondef, ast.AsyncFunctionDef: self.functiondef, ast.ClassDef: self.classdef,
        }

    # -- text ----------------------------------------------------------------------------------

    def offset(self, line: int, column: int) -> int:
        """Index in the source of ``ast``'s (line, UTF-8 byte column)."""
        if not self.ascii:
            column = len(self.lines[line - 1].encode()[:column].decode(errors="replace"))
        return self.starts[line - 1] + column

    def set_indent(self, statement: ast.stmt) -> str:
        """The indentation of the block of ``statement`` (that of its line), now the current one."""
        line = self.lines[statement.lineno - 1]
        self.indent = line[:len(line) - len(line.lstrip(" \t\f"))]
        return self.indent

    def extent(self, node: cst.CSTNode, first: Any, last: Any) -> tuple[int, int, int, int]:
        """(start, end) of ``node``'s text in the source, and (start, end) with the brackets libcst
        counts as the node's own (``(a + b)``: ``ast`` leaves them out); a call's brackets around
        its only argument are the call's."""
        if type(first) is int:
            start, end = first, last
        else:
            start = self.offset(first.lineno, first.col_offset)
            end = self.offset(last.end_lineno, last.end_col_offset)
        if id(node) in self.bare:  # f(x for x in y): ast counts the call's brackets in
            start, end = self.after(start + 1), self.before(end - 1) + 1
        pairs = self.brackets(start, end)
        if pairs and id(node) in self.sole:
            pairs.pop()
        return (start, end, *(pairs[-1] if pairs else (start, end)))

    def after(self, at: int) -> int:
        """Where the first character from ``at`` on that is not whitespace or a comment is."""
        source = self.source
        while at < len(source) and source[at] in " \t\n\r\f\\#":
            if source[at] == "#":
                at = source.find("\n", at)
                at = len(source) if at < 0 else at
            else:
                at += 1
        return at

    def before(self, at: int) -> int:
        """Where the last character before ``at`` that is not whitespace or a comment is (-1: none).
        Raises ``_Unclear`` where a ``#`` on an earlier line might be in a string."""
        source = self.source
        at -= 1
        while at >= 0:
            char = source[at]
            if char == "\n":
                line_start = source.rfind("\n", 0, at) + 1
                comment = _comment(source[line_start:at])
                if comment >= 0:
                    at = line_start + comment
            elif char not in " \t\r\f\\":
                return at
            at -= 1
        return at

    def brackets(self, start: int, end: int) -> list[tuple[int, int]]:
        """The extents of the pairs of brackets around the text from ``start`` to ``end``, inner first."""
        source = self.source
        outer, close = start, end
        pairs: list[tuple[int, int]] = []
        while True:
            after = self.after(close)
            if after >= len(source) or source[after] != ")":
                return pairs
            before = self.before(outer)  # looked at only now: it may have to read earlier lines
            if before < 0 or source[before] != "(":
                return pairs
            outer, close = before, after + 1
            pairs.append((outer, close))

    def line_column(self, at: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, at)
        return line, at - self.starts[line - 1]

    def keep(self, node: cst.CSTNode, first: ast.AST, last: ast.AST | None = None) -> None:
        self.spans[id(node)] = (node, first, first if last is None else last, self.indent)

    # -- statements ----------------------------------------------------------------------------

    def body(self, statements: Sequence[ast.stmt]) -> tuple[cst.BaseStatement, ...]:
        """Statements as libcst groups them: small statements of one line (``a; b``) in one
        ``SimpleStatementLine``."""
        out: list[cst.BaseStatement] = []
        run: list[ast.stmt] = []
        for statement in statements:
            make = self.small.get(type(statement))
            if make is None:
                if run:
                    out.append(self.line(run))
                    run = []
                build = self.compound.get(type(statement))
                if build is None:
                    raise Unsupported(type(statement).__name__)
                out.append(build(statement))
            else:
                if run and run[-1].end_lineno != statement.lineno:
                    out.append(self.line(run))
                    run = []
                run.append(statement)
        if run:
            out.append(self.line(run))
        return tuple(out)

    def line(self, run: list[ast.stmt]) -> cst.SimpleStatementLine:
        node = _Line(tuple(self.small_statement(s) for s in run))
        self.keep(node, run[0], run[-1])
        return node

    def small_statement(self, statement: ast.stmt) -> cst.BaseSmallStatement:
        self.set_indent(statement)
        node = self.small[type(statement)](statement)
        if node is not _PASS and node is not _BREAK and node is not _CONTINUE:
            self.keep(node, statement)
        return node

    def suite(self, statements: list[ast.stmt]) -> cst.BaseSuite:
        """An indented block, or the statements after the colon of a one-line ``if x: y``."""
        first = statements[0]
        start = self.offset(first.lineno, first.col_offset)
        line_start = self.starts[first.lineno - 1]
        before = self.source[line_start:start]
        if before.strip() and all(type(s) in self.small and s.lineno == first.lineno for s in statements):
            space = cst.SimpleWhitespace(before[len(before.rstrip(" \t\f")):])
            node = _Suite(tuple(self.small_statement(s) for s in statements), space)
        else:
            if self.default_indent is None:  # libcst's: the first block's
                line = self.lines[first.lineno - 1]
                inner = line[:len(line) - len(line.lstrip(" \t\f"))]
                self.default_indent = inner[len(self.indent):] if inner.startswith(self.indent) else inner
            node = _Block(self.body(statements))
        self.keep(node, first, statements[-1])
        return node

    def orelse(self, statements: list[ast.stmt]) -> cst.If | cst.Else | None:
        """An ``elif``, or the ``else:`` block of an ``if``, a loop or a ``try``."""
        if not statements:
            return None
        first = statements[0]
        if len(statements) == 1 and type(first) is ast.If and self.source.startswith(
                "elif", self.offset(first.lineno, first.col_offset)):
            return self.if_(first)
        return _Else(self.suite(statements))

    def expr_stmt(self, node: ast.Expr) -> cst.Expr:
        return _Expr(self.e(node.value))

    def assign(self, node: ast.Assign) -> cst.Assign:
        return _Assign(tuple(_AssignTarget(self.e(t)) for t in node.targets), self.e(node.value))

    def augassign(self, node: ast.AugAssign) -> cst.AugAssign:
        return _AugAssign(self.e(node.target), _AUGMENTED[type(node.op)], self.e(node.value))

    def annassign(self, node: ast.AnnAssign) -> cst.AnnAssign:
        return _AnnAssign(self.e(node.target), _Annotation(self.e(node.annotation)), self.optional(node.value))

    def return_(self, node: ast.Return) -> cst.Return:
        return _Return(self.optional(node.value))

    def delete(self, node: ast.Delete) -> cst.Del:
        targets = [self.e(t) for t in node.targets]
        if len(targets) == 1:
            return _Del(targets[0])
        both = _Tuple(tuple(_Element(t) for t in targets))
        self.keep(both, node.targets[0], node.targets[-1])
        return _Del(both)

    def raise_(self, node: ast.Raise) -> cst.Raise:
        return _Raise(self.optional(node.exc), None if node.cause is None else _From(self.e(node.cause)))

    def assert_(self, node: ast.Assert) -> cst.Assert:
        return _Assert(self.e(node.test), self.optional(node.msg))

    def global_(self, node: ast.Global) -> cst.Global:
        return _Global(tuple(_NameItem(_Name(n)) for n in node.names))

    def nonlocal_(self, node: ast.Nonlocal) -> cst.Nonlocal:
        return _Nonlocal(tuple(_NameItem(_Name(n)) for n in node.names))

    def import_(self, node: ast.Import) -> cst.Import:
        return _Import(tuple(self.alias(a) for a in node.names))

    def importfrom(self, node: ast.ImportFrom) -> cst.ImportFrom:
        names: Any = _STAR if node.names[0].name == "*" else tuple(self.alias(a) for a in node.names)
        module = None if node.module is None else self.dotted_name(node.module)
        return _ImportFrom(module, names, tuple(cst.Dot() for _ in range(node.level or 0)))

    def alias(self, node: ast.alias) -> cst.ImportAlias:
        return _ImportAlias(self.dotted_name(node.name), None if node.asname is None else _AsName(_Name(node.asname)))

    @staticmethod
    def dotted_name(name: str) -> cst.Name | cst.Attribute:
        parts = name.split(".")
        node: cst.Name | cst.Attribute = _Name(parts[0])
        for part in parts[1:]:
            node = _Attribute(node, _Name(part))
        return node

    def if_(self, node: ast.If) -> cst.If:
        self.set_indent(node)
        built = _If(self.e(node.test), self.suite(node.body), self.orelse(node.orelse))
        self.keep(built, node)
        return built

    def for_(self, node: ast.For | ast.AsyncFor) -> cst.For:
        self.set_indent(node)
        built = _For(self.e(node.target), self.e(node.iter), self.suite(node.body), self.orelse(node.orelse),
                     _ASYNC if type(node) is ast.AsyncFor else None)
        self.keep(built, node)
        return built

    def while_(self, node: ast.While) -> cst.While:
        self.set_indent(node)
        built = _While(self.e(node.test), self.suite(node.body), self.orelse(node.orelse))
        self.keep(built, node)
        return built

    def with_(self, node: ast.With | ast.AsyncWith) -> cst.With:
        self.set_indent(node)
        items = tuple(_WithItem(self.e(i.context_expr),
                                None if i.optional_vars is None else _AsName(self.e(i.optional_vars)))
                      for i in node.items)
        if len(items) == 1 and items[0].asname is None:  # `with (x):` is libcst's bracketed item list
            self.sole.add(id(items[0].item))
        built = _With(items, self.suite(node.body), _ASYNC if type(node) is ast.AsyncWith else None)
        self.keep(built, node)
        return built

    def try_(self, node: ast.Try) -> cst.Try:
        indent = self.set_indent(node)
        body = self.suite(node.body)
        handlers = []
        for handler in node.handlers:
            self.indent = indent
            kind = self.optional(handler.type)
            made = _ExceptHandler(self.suite(handler.body), kind,
                                  None if handler.name is None else _AsName(_Name(handler.name)))
            self.keep(made, handler)
            handlers.append(made)
        built = _Try(body, tuple(handlers), self.orelse(node.orelse),
                     _Finally(self.suite(node.finalbody)) if node.finalbody else None)
        self.keep(built, node)
        return built

    def functiondef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> cst.FunctionDef:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        self.set_indent(node)
        decorators = tuple(_Decorator(self.e(d)) for d in node.decorator_list)
        parameters = self.parameters(node.args)
        returns = None if node.returns is None else _Annotation(self.e(node.returns))
        built = _FunctionDef(_Name(node.name), parameters, self.suite(node.body), decorators, returns,
                             _ASYNC if type(node) is ast.AsyncFunctionDef else None)
        self.keep(built, node)
        return built

    def classdef(self, node: ast.ClassDef) -> cst.ClassDef:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        self.set_indent(node)
        decorators = tuple(_Decorator(self.e(d)) for d in node.decorator_list)
        bases = tuple(self.arg(b) for b in node.bases)
        if len(bases) == 1 and not node.keywords and type(node.bases[0]) is not ast.Starred and \
                not self.trailing_comma(node.bases[0], len(self.source)):
            self.sole.add(id(bases[0].value))
        keywords = tuple(self.keyword_arg(k) for k in node.keywords)
        built = _ClassDef(_Name(node.name), self.suite(node.body), bases, keywords, decorators)
        self.keep(built, node)
        return built

    def parameters(self, node: ast.arguments) -> cst.Parameters:
        positional = [*node.posonlyargs, *node.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(node.defaults)) + list(node.defaults)
        made = [self.param(a, d, "") for a, d in zip(positional, defaults)]
        only = len(node.posonlyargs)
        kwonly = tuple(self.param(a, d, "") for a, d in zip(node.kwonlyargs, node.kw_defaults))
        star: Any = (self.param(node.vararg, None, "*") if node.vararg is not None
                     else cst.ParamStar() if kwonly else cst.MaybeSentinel.DEFAULT)
        return _Parameters(tuple(made[only:]), star, kwonly,
                           None if node.kwarg is None else self.param(node.kwarg, None, "**"), tuple(made[:only]),
                           cst.ParamSlash() if only else cst.MaybeSentinel.DEFAULT)

    def param(self, arg: ast.arg, default: ast.expr | None, star: str) -> cst.Param:
        return _Param(_Name(arg.arg), None if arg.annotation is None else _Annotation(self.e(arg.annotation)),
                      self.optional(default), star)

    # -- expressions ---------------------------------------------------------------------------

    def e(self, node: ast.expr) -> cst.BaseExpression:
        make = self.expr.get(type(node))
        if make is None:
            raise Unsupported(type(node).__name__)
        built = make(node)
        if built is not _ELLIPSIS:
            if self.in_fstring and _OLD_FSTRINGS:
                self.unplaced.add(id(built))
                if type(node) is ast.Tuple:
                    return built
            self.spans[id(built)] = (built, node, node, self.indent)
        return built

    def optional(self, node: ast.expr | None) -> cst.BaseExpression | None:
        return None if node is None else self.e(node)

    def name(self, node: ast.Name) -> cst.Name:
        return _Name(node.id)

    def attribute(self, node: ast.Attribute) -> cst.Attribute:
        return _Attribute(self.e(node.value), _Name(node.attr))

    def call(self, node: ast.Call) -> cst.Call:
        args = [self.arg(a) for a in node.args]
        if node.keywords:
            if node.args and any((k.lineno, k.col_offset) < (node.args[-1].lineno, node.args[-1].col_offset)
                                 for k in node.keywords):  # f(x=1, *rest): in the order written
                pairs = [((a.lineno, a.col_offset), made) for a, made in zip(node.args, args)]
                pairs += [((k.lineno, k.col_offset), self.keyword_arg(k)) for k in node.keywords]
                args = [made for _, made in sorted(pairs, key=lambda pair: pair[0])]
            else:
                args += [self.keyword_arg(k) for k in node.keywords]
        if len(args) == 1 and not node.keywords and type(node.args[0]) is not ast.Starred and \
                not self.trailing_comma(node.args[0], self.offset(node.end_lineno, node.end_col_offset) - 1):  # type: ignore[arg-type]
            self.sole.add(id(args[0].value))
            if type(node.args[0]) is ast.GeneratorExp and self._bare(node.args[0]):
                self.bare.add(id(args[0].value))
        return _Call(self.e(node.func), tuple(args))

    def trailing_comma(self, node: ast.expr, stop: int) -> bool:
        """Whether a comma follows ``node`` and the brackets that close after it, before ``stop``
        (``f(x,)``: the brackets are then not around ``x`` alone)."""
        at = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[arg-type]
        while True:
            at = self.after(at)
            if at >= stop or self.source[at] != ")":
                return at < stop and self.source[at] == ","
            at += 1

    def _bare(self, node: ast.GeneratorExp) -> bool:
        """Whether the brackets ``ast`` counts in the extent of ``node``, the only argument of a
        call, are the call's (``f(x for x in y)``, not ``f((x for x in y))``)."""
        before = self.before(self.offset(node.lineno, node.col_offset))
        return before < 0 or self.source[before] != "("

    def arg(self, node: ast.expr) -> cst.Arg:
        if type(node) is ast.Starred:
            return _Arg(self.e(node.value), None, "*")
        return _Arg(self.e(node), None, "")

    def keyword_arg(self, node: ast.keyword) -> cst.Arg:
        if node.arg is None:
            return _Arg(self.e(node.value), None, "**")
        return _Arg(self.e(node.value), _Name(node.arg), "")

    def constant(self, node: ast.Constant) -> cst.BaseExpression:
        value = node.value
        if value is None or value is True or value is False:
            return _Name(_KEYWORDS[value])
        if value is Ellipsis:
            return _ELLIPSIS
        kind = type(value)
        start = self.offset(node.lineno, node.col_offset)
        text = self.source[start:self.offset(node.end_lineno, node.end_col_offset)]
        if kind is int:
            return _Integer(text)
        if kind is float:
            return _Float(text)
        if kind is complex:
            return _Imaginary(text)
        pieces = _string_pieces(text)
        if len(pieces) == 1:
            return _SimpleString(text)
        return self.concatenated([(start + a, start + b, _SimpleString(text[a:b])) for a, b in pieces])

    def concatenated(self, pieces: list[tuple[int, int, cst.BaseString]]) -> cst.BaseString:
        """Literals written side by side, as libcst nests them: ``a "b" "c"`` is (a, (b, c))."""
        built = pieces[-1][2]
        self.spans[id(built)] = (built, pieces[-1][0], pieces[-1][1], self.indent)
        for start, end, piece in reversed(pieces[:-1]):
            self.spans[id(piece)] = (piece, start, end, self.indent)
            built = _ConcatenatedString(piece, built)
            self.spans[id(built)] = (built, start, pieces[-1][1], self.indent)
        return built

    def joinedstr(self, node: ast.JoinedStr) -> cst.BaseString:
        start = self.offset(node.lineno, node.col_offset)
        text = self.source[start:self.offset(node.end_lineno, node.end_col_offset)]
        pieces = _string_pieces(text)
        if len(pieces) == 1:
            return self.formatted(node.values)
        made = []
        values = list(node.values)
        for a, b in pieces:
            inside = [v for v in values if type(v) is ast.FormattedValue
                      and start + a <= self.offset(v.value.lineno, v.value.col_offset) < start + b]
            if "f" in text[a:b].split(text[b - 1], 1)[0].lower():
                made.append((start + a, start + b, self.formatted(inside)))
            else:
                made.append((start + a, start + b, _SimpleString(text[a:b])))
        return self.concatenated(made)

    def formatted(self, values: list[ast.expr]) -> cst.FormattedString:
        # Before Python 3.12, ``ast`` places the expressions of an f-string by parsing them again
        # on their own and finding their text in the line, which can get their columns wrong (the
        # same text earlier on the line) and counts a bare tuple's braces in: no positions for
        # findings there, and no text for such tuples.
        self.in_fstring += 1
        try:
            return self._formatted(values)
        finally:
            self.in_fstring -= 1

    def _formatted(self, values: list[ast.expr]) -> cst.FormattedString:
        parts: list[cst.BaseFormattedStringContent] = []
        for value in values:
            if type(value) is ast.FormattedValue:
                spec = value.format_spec
                parts.append(_FormattedStringExpression(
                    self.e(value.value), None if value.conversion == -1 else chr(value.conversion),
                    None if spec is None else tuple(self._formatted(spec.values).parts)))  # type: ignore[attr-defined]
            else:
                parts.append(_FormattedStringText(str(value.value)))  # type: ignore[attr-defined]
        return _FormattedString(tuple(parts), 'f"', '"')

    def subscript(self, node: ast.Subscript) -> cst.Subscript:
        index = node.slice
        if type(index) is ast.Tuple and not self.bracketed(index):  # a[i, j]: one element each
            elements = tuple(_SubscriptElement(self.index(i)) for i in index.elts)
        else:
            elements = (_SubscriptElement(self.index(index)),)
        return _Subscript(self.e(node.value), elements)

    def bracketed(self, node: ast.Tuple) -> bool:
        """Whether a tuple is in brackets of its own (``a[(i, j)]``), not only its first element
        (``a[(i), j]``, where ``ast`` starts the tuple at the bracket)."""
        if not node.elts:
            return True
        last = node.elts[-1]
        end = self.offset(last.end_lineno, last.end_col_offset)  # type: ignore[arg-type]
        pairs = self.brackets(self.offset(last.lineno, last.col_offset), end)
        return ")" in self.source[pairs[-1][1] if pairs else end:self.offset(node.end_lineno, node.end_col_offset)]  # type: ignore[arg-type]

    def index(self, node: ast.expr) -> cst.BaseSlice:
        if type(node) is ast.Slice:
            return self.slice_(node)
        if type(node) is ast.Starred:
            raise Unsupported("starred subscript")
        made = _Index(self.e(node))
        return made

    def slice_(self, node: ast.Slice) -> cst.Slice:
        lower, upper, step = self.optional(node.lower), self.optional(node.upper), self.optional(node.step)
        second: Any = _COLON
        if step is None:  # `a[i:]` or `a[i::]`: only the text tells
            before = node.upper or node.lower
            tail = self.source[self.offset(before.end_lineno, before.end_col_offset) if before else
                               self.offset(node.lineno, node.col_offset):
                               self.offset(node.end_lineno, node.end_col_offset)]
            if tail.count(":") < (1 if node.upper else 2):
                second = cst.MaybeSentinel.DEFAULT
        return _Slice(lower, upper, step, _COLON, second)

    def binop(self, node: ast.BinOp) -> cst.BinaryOperation:
        return _BinaryOperation(self.e(node.left), _BINARY[type(node.op)], self.e(node.right))

    def boolop(self, node: ast.BoolOp) -> cst.BooleanOperation:
        operator = _BOOLEAN[type(node.op)]
        values = node.values
        built = _BooleanOperation(self.e(values[0]), operator, self.e(values[1]))
        start = self.offset(node.lineno, node.col_offset)  # a bracket before values[0] included
        for index, value in enumerate(values[2:], 2):
            last = values[index - 1]
            end = self.offset(last.end_lineno, last.end_col_offset)
            pairs = self.brackets(self.offset(last.lineno, last.col_offset), end)
            self.spans[id(built)] = (built, start, pairs[-1][1] if pairs else end, self.indent)
            built = _BooleanOperation(built, operator, self.e(value))
        return built

    def unaryop(self, node: ast.UnaryOp) -> cst.UnaryOperation:
        return _UnaryOperation(_UNARY[type(node.op)], self.e(node.operand))

    def compare(self, node: ast.Compare) -> cst.Comparison:
        return _Comparison(self.e(node.left), tuple(_ComparisonTarget(_COMPARE[type(op)], self.e(c))
                                                    for op, c in zip(node.ops, node.comparators)))

    def ifexp(self, node: ast.IfExp) -> cst.IfExp:
        return _IfExp(self.e(node.test), self.e(node.body), self.e(node.orelse))

    def lambda_(self, node: ast.Lambda) -> cst.Lambda:
        return _Lambda(self.parameters(node.args), self.e(node.body))

    def elements(self, values: list[ast.expr]) -> tuple[cst.BaseElement, ...]:
        return tuple(_StarredElement(self.e(v.value)) if type(v) is ast.Starred else _Element(self.e(v))
                     for v in values)

    def list_(self, node: ast.List) -> cst.List:
        return _List(self.elements(node.elts))

    def tuple_(self, node: ast.Tuple) -> cst.Tuple:
        return _Tuple(self.elements(node.elts))

    def set_(self, node: ast.Set) -> cst.Set:
        return _Set(self.elements(node.elts))

    def dict_(self, node: ast.Dict) -> cst.Dict:
        return _Dict(tuple(_StarredDictElement(self.e(v)) if k is None else _DictElement(self.e(k), self.e(v))
                           for k, v in zip(node.keys, node.values)))

    def for_in(self, generators: list[ast.comprehension]) -> cst.CompFor:
        inner = None
        for generator in reversed(generators):
            inner = _CompFor(self.e(generator.target), self.e(generator.iter),
                             tuple(_CompIf(self.e(i)) for i in generator.ifs), inner,
                             _ASYNC if generator.is_async else None)
        assert inner is not None
        return inner

    def listcomp(self, node: ast.ListComp) -> cst.ListComp:
        return _ListComp(self.e(node.elt), self.for_in(node.generators))

    def setcomp(self, node: ast.SetComp) -> cst.SetComp:
        return _SetComp(self.e(node.elt), self.for_in(node.generators))

    def genexp(self, node: ast.GeneratorExp) -> cst.GeneratorExp:
        return _GeneratorExp(self.e(node.elt), self.for_in(node.generators))

    def dictcomp(self, node: ast.DictComp) -> cst.DictComp:
        return _DictComp(self.e(node.key), self.e(node.value), self.for_in(node.generators))

    def await_(self, node: ast.Await) -> cst.Await:
        return _Await(self.e(node.value))

    def yield_(self, node: ast.Yield) -> cst.Yield:
        return _Yield(self.optional(node.value))

    def yieldfrom(self, node: ast.YieldFrom) -> cst.Yield:
        return _Yield(_From(self.e(node.value)))

    def namedexpr(self, node: ast.NamedExpr) -> cst.NamedExpr:
        return _NamedExpr(self.e(node.target), self.e(node.value))

    def starred(self, node: ast.Starred) -> cst.StarredElement:
        return _StarredElement(self.e(node.value))


def _comment(line: str) -> int:
    """Where the comment of the line before a line of code starts (-1: none). Raises ``_Unclear``
    where that cannot be told from the line alone."""
    if "'''" in line or '"""' in line:
        if (line.count("'''") + line.count('"""')) % 2:  # it ends a string begun lines above
            end = max(line.rfind("'''"), line.rfind('"""')) + 3
            found = _comment(line[end:]) if "'''" not in line[end:] and '"""' not in line[end:] else -1
            return -1 if found < 0 else end + found
        import io
        import tokenize

        try:
            for token in tokenize.generate_tokens(io.StringIO(line + "\n").readline):
                if token.type == tokenize.COMMENT:
                    return token.start[1]
        except (tokenize.TokenError, SyntaxError):
            raise _Unclear from None
        return -1
    quote, at = "", 0
    while at < len(line):
        char = line[at]
        if quote:
            if char == "\\":
                at += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            return at
        at += 1
    return -1


def _string_pieces(text: str) -> list[tuple[int, int]]:
    """Where each string literal of ``text`` (one, or several written side by side) starts and ends."""
    pieces = []
    at, end = 0, len(text)
    while at < end:
        start = at
        while text[at] not in "'\"":
            at += 1
        quote = text[at:at + 3] if text[at:at + 3] in ("'''", '"""') else text[at]
        at += len(quote)
        closing = text.find(quote, at)
        escape = text.find("\\", at, closing)
        while escape >= 0:  # a backslash escapes the character after it (a quote, another backslash)
            at = escape + 2
            closing = text.find(quote, at)
            escape = text.find("\\", at, closing)
        at = closing + len(quote)
        pieces.append((start, at))
        while at < end and text[at] not in "'\"" and not text[at].isalpha():
            if text[at] == "#":  # a comment between the pieces of a bracketed concatenation
                at = text.find("\n", at)
                at = end if at < 0 else at
            else:
                at += 1
    return pieces


# The file whose tree was built last: the text of its nodes (``text``). One file is analysed at a
# time in a process (``loopcheck.engine`` builds a tree only while no other thread runs).
_last: _Builder | None = None


def module(tree: ast.Module, source: str) -> cst.Module:
    """The libcst module of ``source`` built from its ``ast`` ``tree``; raises ``Unsupported``."""
    global _last
    _last = None
    builder = _Builder(source)
    built = _Module(builder.body(tree.body), source.endswith(("\n", "\r")),
                    builder.default_indent or "    ", "\r\n" if builder.crlf else "\n")
    _last = builder
    return built  # type: ignore[no-any-return]


def conjunction(left: cst.BaseExpression, right: cst.BaseExpression) -> cst.BooleanOperation:
    """A new ``left and right`` over nodes of any tree (the model's reading of ``if a: if b: return``);
    it has no place in the file (``extent`` None) and its code is composed (``syntax.source``)."""
    return _BooleanOperation(left, _BOOLEAN[ast.And], right)  # type: ignore[no-any-return]


def disjunction(left: cst.BaseExpression, right: cst.BaseExpression) -> cst.BooleanOperation:
    """A new ``left or right``, composed like ``conjunction``'s."""
    return _BooleanOperation(left, _BOOLEAN[ast.Or], right)  # type: ignore[no-any-return]


def negation(operand: cst.BaseExpression) -> cst.UnaryOperation:
    """A new ``not operand``, composed like ``conjunction``'s."""
    return _UnaryOperation(_UNARY[ast.Not], operand)  # type: ignore[no-any-return]


def extent(node: cst.CSTNode) -> tuple[int, int, int, int] | None:
    """``_Builder.extent`` of ``node`` when it is a node of the tree ``module`` built last."""
    if _last is None:
        return None
    span = _last.spans.get(id(node))
    if span is None or span[0] is not node:
        return None
    try:
        return _last.extent(node, span[1], span[2])
    except _Unclear:
        return None


def text(node: cst.CSTNode) -> str | None:
    """The code of expression ``node`` as libcst writes it (its own brackets included) when it is a
    node of the tree ``module`` built last, else None (statements too: libcst writes them with the
    comments above them)."""
    if _last is None or not isinstance(node, cst.BaseExpression):
        return None
    found = extent(node)
    if found is None:  # a name the tree holds as text (``def f``, ``x.attr``, ``import a.b``)
        kind = type(node)
        if kind is cst.Name:
            return node.value  # type: ignore[attr-defined,no-any-return]
        if kind is cst.Attribute:
            value = text(node.value)  # type: ignore[attr-defined]
            return None if value is None else f"{value}.{node.attr.value}"  # type: ignore[attr-defined]
        return "..." if kind is cst.Ellipsis else None
    code = _last.source[found[2]:found[3]]  # type: ignore[union-attr]
    if "\n" not in code:
        return code
    return _as_written(code, _last.spans[id(node)][3], _last.crlf)


def _as_written(code: str, indent: str, crlf: bool) -> str | None:
    """``code`` as libcst writes it alone: without the indentation of its block on the lines it
    continues in brackets, and with ``\\n`` line ends where the file's are ``\\r\\n`` (lines after a
    backslash, and lines inside a string, are kept as they are). None where ``code`` does not
    tokenize on its own."""
    if "\\" not in code and '"""' not in code and "'''" not in code:
        if crlf:
            code = code.replace("\r\n", "\n")
        return code.replace("\n" + indent, "\n") if indent else code
    import io
    import tokenize

    starts = [0]
    for line in io.StringIO(code):
        starts.append(starts[-1] + len(line))
    kept: list[tuple[int, int]] = []  # spans of string tokens, where newlines are text
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.start[0] != token.end[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                kept.append((starts[token.start[0] - 1] + token.start[1], starts[token.end[0] - 1] + token.end[1]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    out, at = [], 0
    for line_end in starts[1:-1]:  # the offset just after each newline
        line = code[at:line_end]
        at = line_end
        if code.endswith(("\\\n", "\\\r\n"), 0, at) or any(a < at < b for a, b in kept):
            out.append(line)
            continue
        out.append(line[:-2] + "\n" if crlf and line.endswith("\r\n") else line)
        if indent and code.startswith(indent, at):
            at += len(indent)
    out.append(code[at:])
    return "".join(out)


def statement_text(node: cst.CSTNode) -> str | None:
    """The source of statement ``node`` from the start of its keyword's line (decorators and comments
    above it left out, its indentation as written), for a node of the tree built last; else None."""
    if _last is None:
        return None
    span = _last.spans.get(id(node))
    if span is None or span[0] is not node or not isinstance(span[1], ast.stmt):
        return None
    statement = span[1]
    return _last.source[_last.offset(statement.lineno, 0):
                        _last.offset(statement.end_lineno, statement.end_col_offset)]  # type: ignore[arg-type]


def start(node: cst.CSTNode) -> int | None:
    """Where ``node``'s text starts in the source (its own brackets left out), for a node of the
    tree built last."""
    found = extent(node)
    return None if found is None else found[0]


def line_column(at: int) -> tuple[int, int]:
    """The line (from 1) and column (from 0) of ``at`` in the source of the tree built last."""
    assert _last is not None
    return _last.line_column(at)


def position(node: cst.CSTNode) -> tuple[int, int, int, int] | None:
    """(line, column, end line, end column) of ``node`` as libcst's ``PositionProvider`` gives
    them, for a node of the tree built last that has no brackets of its own (whose positions
    loopcheck.positions finds either way), else None."""
    found = extent(node)
    if found is None or found[:2] != found[2:] or id(node) in _last.unplaced:  # type: ignore[union-attr]
        return None
    return (*_last.line_column(found[0]), *_last.line_column(found[1]))  # type: ignore[union-attr]


def forget() -> None:
    """Drop the last tree's text (and the nodes it holds)."""
    global _last
    _last = None


def differences(built: object, parsed: object, where: str = "module") -> Iterator[str]:
    """Where ``built`` (from ``module``) and ``parsed`` (libcst's parse of the same source) differ
    in a field the model reads, or in the text of a node: what the tests and
    ``benchmarks/from_ast_same.py`` check. Of an f-string, only the expressions are compared (the
    built tree keeps the value of the literal parts, libcst their code)."""
    from loopcheck.model.syntax import _SKIP_FIELD

    if isinstance(parsed, (tuple, list)):
        if not isinstance(built, (tuple, list)) or len(built) != len(parsed):
            yield f"{where}: {len(parsed)} items, built {_shown(built)}"
            return
        for index, (a, b) in enumerate(zip(built, parsed)):
            yield from differences(a, b, f"{where}[{index}]")
        return
    if not isinstance(parsed, cst.CSTNode):
        if built != parsed and not isinstance(parsed, cst.MaybeSentinel):
            yield f"{where}: {_shown(parsed)} built {_shown(built)}"
        return
    if type(built) is not type(parsed):
        yield f"{where}: {type(parsed).__name__} built {type(built).__name__}"
        return
    if isinstance(parsed, cst.BaseExpression) and not isinstance(parsed, cst.StarredElement):
        code = cst.Module(body=[]).code_for_node(parsed)
        if text(built) != code and not (type(parsed) is cst.Tuple and id(built) in _last.unplaced):  # type: ignore[union-attr]  # type: ignore[arg-type]
            yield f"{where}: text {code!r:.60} built {text(built)!r:.60}"  # type: ignore[arg-type]
    if isinstance(parsed, (cst.FormattedStringText, cst.BaseAugOp, cst.BaseBinaryOp, cst.BaseBooleanOp,
                           cst.BaseCompOp, cst.BaseUnaryOp, cst.Asynchronous, cst.Colon)):
        return
    for field in dataclasses.fields(parsed):
        name = field.name
        if name.startswith(_SKIP_FIELD) and name not in ("operator", "star", "star_arg", "star_kwarg",
                                                         "asynchronous"):
            continue
        if isinstance(parsed, cst.FormattedString) and name in ("start", "end") or name == "conversion":
            continue
        if isinstance(parsed, cst.FormattedString) and name == "parts":
            expressions = [p for p in parsed.parts if isinstance(p, cst.FormattedStringExpression)]
            yield from differences([p for p in built.parts if isinstance(p, cst.FormattedStringExpression)],
                                   expressions, f"{where}.parts")
            continue
        yield from differences(getattr(built, name), getattr(parsed, name), f"{where}.{name}")


def _shown(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return f"[{', '.join(_shown(v) for v in value)}]"
    return type(value).__name__ if isinstance(value, cst.CSTNode) else f"{value!r:.60}"
