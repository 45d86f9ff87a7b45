"""Whether a module computes the same thing in train and eval mode, as far as the code shows it.

Eval mode changes only layers that read ``self.training``: dropout, BatchNorm, spectral norm and
the like. A model whose every layer the checked file (or a project module it imports, and the
project modules that one imports, two levels on) builds from plain layers (``nn.Linear``,
``nn.Conv2d``, ``nn.LayerNorm``, an ``InstanceNorm`` without running statistics, a weight-normalised
convolution, a dropout whose rate every construction leaves at 0, ...) trains the same in both modes,
so leaving it in eval mode is inert. A layer class, module or dropout rate handed down through
constructor parameters counts as what every construction of the class the code shows passes for it
(``ResBlock(c, normalization=self.norm)`` with ``self.norm = CondInstanceNorm``), defaults included;
a parameter named as an activation (``hidden_activation``, ``act_layer``) that a construction fills
with a value from elsewhere (an estimator's public argument) counts as an activation. Anything else
the code does not show (a hub checkpoint, a torchvision constructor, a module passed in from
outside, a class of a module imported further away, a norm chosen by a config flag) counts as
mode-dependent. One library model is known: a diffusers
``UNet2DConditionModel.from_pretrained`` has neither dropout nor BatchNorm unless the file adds
an adapter with dropout (any ``*dropout=`` keyword other than 0 counts).

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module("model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())\\n"))
>>> mode_matters(m, "model")
False
>>> mode_matters(build(cst.parse_module("model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))\\n")), "model")
True
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, is_zero, last_part, source
from loopcheck.model.values import numeric, option_defaults
from loopcheck.patterns import Pattern
from loopcheck.project.facts import ast_dotted, import_table
from loopcheck.project.walk import parsed

if TYPE_CHECKING:
    from loopcheck.model import FileModel

# torch layers whose forward does not read `self.training` (RNNs and attention only without dropout)
_MODE_FREE = {
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm",
    "Identity", "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Softplus",
    "Softsign", "LeakyReLU", "ELU", "SELU", "CELU", "PReLU", "Hardtanh", "Hardswish", "Hardsigmoid", "Tanhshrink",
    "Threshold", "GLU", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Parameter", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell", "MultiheadAttention", "ZeroPad2d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CosineSimilarity", "PairwiseDistance", "Variable", "Tensor",
    "FloatTensor", "LongTensor", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
    "SmoothL1Loss", "HuberLoss", "KLDivLoss",
}
# calls of a constructor that build nothing (a lower-case call there may return any module:
# `torchvision.models.resnet18()`, `spectral_norm(conv)`)
_BUILDS_NOTHING = {"super", "__init__", "range", "len", "int", "float", "list", "tuple", "dict", "zip", "enumerate",
                   "isinstance", "print", "append", "extend", "register_buffer", "register_parameter", "zeros", "ones",
                   "randn", "rand", "empty", "tensor", "arange", "linspace", "full", "eye", "sqrt", "log", "exp",
                   "uniform_", "normal_", "zeros_", "ones_", "constant_", "xavier_uniform_", "xavier_normal_",
                   "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "trunc_normal_", "reset_parameters", "max",
                   "min", "sum", "getattr", "hasattr", "format", "items", "keys", "values", "zero_", "fill_",
                   "copy_", "setattr", "partial", "OrderedDict"}
# InstanceNorm reads `self.training` only to choose between its running statistics and the batch's:
# without `track_running_stats=True` (the default) it normalises by the batch in both modes
_INSTANCE_NORMS = {"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
                   "LazyInstanceNorm3d"}
_MODE_WORDS = Pattern(r"dropout|drop_?path|batch_?norm|instance_?norm|rrelu|stochastic_depth|spectral_norm", re.I)
_MOVES = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_", "type"}
_WRAPPERS = {"DDP", "DistributedDataParallel", "DataParallel", "FSDP", "FullyShardedDataParallel", "compile",
             "get_peft_model", "prepare", "unwrap_model"}
# library models known to hold no mode-dependent layer: only the file can add one (an adapter's dropout)
_KNOWN_MODE_FREE = {"UNet2DConditionModel"}
_DROPOUTS = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}
# weight normalisation recomputes the weight from its direction and norm in a hook, the same in both
# modes (spectral norm's power iteration runs only in training mode: it stays mode-dependent)
_WEIGHT_NORMS = {"weight_norm"}
_IMPORT_DEPTH = 2  # project modules read through the imports of imported modules, this many levels on
# A constructor parameter named as an activation (`hidden_activation`, `act_layer`, `nonlinearity`)
# holds an activation function: handed on from elsewhere (an estimator's public argument, default
# `nn.Tanh()`), it counts as one; a call written into the construction (`act=nn.Dropout(0.1)`) is read
_ACTIVATION_SLOT = Pattern(r"(?:^|_)(?:act|activation|nonlinearity|non_linearity)(?:_fn|_func|_layer)?$")


def mode_matters(model: FileModel, name: str) -> bool:
    """False only when every construction of ``name`` the file shows builds a mode-free module."""
    return inert_unless(model, name) != ()


def inert_unless(model: FileModel, name: str) -> tuple[str, ...] | None:
    """``()`` where every construction of ``name`` the file shows builds a mode-free module; the
    options (``args.dropout``) where it is mode-free only while they keep the default of 0 they have
    in the file (a dropout rate the user may raise); None where eval mode may matter."""
    calls = model.index.roles.constructed.get(last_part(name), [])
    if not calls:
        return None
    options: set[str] = set()
    checker: _Checker | None = None
    built = False  # whether the file shows any call that builds the module itself
    for call in calls:
        call = _unmoved(call)
        called = func_name(call) or ""
        if last_part(called) in _WRAPPERS or isinstance(call.func, cst.Attribute) \
                and call.func.attr.value in _MOVES and dotted(call.func.value) is not None:
            continue  # DDP(model), get_peft_model(unet, config), model.to(device): the module inside decides
        built = True
        if called.endswith(".from_pretrained") and called.split(".")[-2] in _KNOWN_MODE_FREE:
            if _adds_dropout(model):
                return None
            continue
        checker = checker or _Checker(model)
        if not checker.call(call):
            return None
        options |= checker.options
    # only moves and wrappers (`self.model = self.model.to(device)` of a model passed in or returned
    # by a helper): the module inside is unknown
    return tuple(sorted(options)) if built else None


def _unmoved(call: cst.Call) -> cst.Call:
    """``Net(...)`` for ``Net(...).to(device).train()``."""
    while isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES \
            and isinstance(call.func.value, cst.Call):
        call = call.func.value
    return call


def _adds_dropout(model: FileModel) -> bool:
    return any(arg.keyword is not None and "dropout" in arg.keyword.value.lower() and not is_zero(arg.value)
               for call in model.index.calls for arg in call.args)


class _Checker:
    """Reads the classes the file and the project modules it imports define (stdlib ``ast``), and
    those modules' own imports a few levels on (a generator built from blocks of a sibling module)."""

    def __init__(self, model: FileModel) -> None:
        self.model = model
        self.options: frozenset[str] = frozenset()  # what the last call's verdict relied on
        self.defaults: dict[str, cst.BaseExpression | None] | None = None  # argparse options, read once
        self.modules: dict[Path, _Module | None] = {}
        self.own = _Module(model.source or model.module.code)
        project = model.project
        if project is not None:
            self.own.resolve = self._resolver(project.path, project.own.imports, 0)

    def call(self, call: cst.Call) -> bool:
        """Whether the module this call builds is mode-free, as written or (``options``) while the
        options it passes keep their default of 0 (``LinkPredictor(..., args.dropout)``)."""
        self.options = frozenset()
        try:
            node = ast.parse(source(call), mode="eval").body
        except SyntaxError:
            return False
        if self.own.expression(node):
            return True
        zero = frozenset(name for arg in call.args if (name := dotted(arg.value)) is not None
                         and self._zero_option(name))
        if not zero:
            return False
        self.own.zero_options = zero
        try:
            free = self.own.expression(node)
        finally:
            self.own.zero_options = frozenset()
        if free:
            self.options = zero
        return free

    def _zero_option(self, name: str) -> bool:
        """``args.dropout`` of ``add_argument("--dropout", type=float, default=0.0)`` that the file
        never assigns: 0 unless the user raises it."""
        if "." not in name:
            return False
        if self.defaults is None:
            self.defaults = dict(option_defaults(self.model.index))
        default = self.defaults.get(last_part(name))
        text = self.model.source or ""
        return default is not None and numeric(default, self.model.index) == 0 \
            and re.search(rf"(?<![\w.]){re.escape(name)}\s*(?:[-+*/]?=)(?!=)", text) is None

    def _resolver(self, importer: Path, imports: dict[str, tuple[str, str, int]],
                  depth: int) -> Callable[[str], tuple[_Module, str] | None]:
        def resolve(called: str) -> tuple[_Module, str] | None:
            return self._imported(importer, imports, called, depth)
        return resolve

    def _imported(self, importer: Path, imports: dict[str, tuple[str, str, int]], called: str,
                  depth: int) -> tuple[_Module, str] | None:
        """The project module and class name behind ``Net`` / ``models.Net`` imported by ``importer``."""
        project = self.model.project
        if project is None:
            return None
        local, _, attr = called.partition(".")
        imported = imports.get(local)
        if imported is None or "." in attr:
            return None
        module, name, level = imported
        if attr:  # `import models` then `models.Net(...)`
            target, cls = (f"{module}.{name}" if module and name else (name or module)), attr
        else:  # `from models import Net`
            target, cls = module, name
        path = project.index.resolve(importer, target, level)
        if path is None:
            return None
        if path not in self.modules:
            try:
                found = _Module(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                found = None
            if found is not None and depth < _IMPORT_DEPTH:
                found.resolve = self._resolver(path, found.imports, depth + 1)
            self.modules[path] = found
        found = self.modules[path]
        return (found, cls) if found is not None else None


class _Module:
    def __init__(self, text: str) -> None:
        tree = parsed(text) or ast.Module(body=[], type_ignores=[])
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        # module-level builder functions (`def conv3x3(...): return nn.Conv2d(...)`)
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.builders: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}  # methods, by name
        for cls in self.classes.values():
            for method in cls.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.builders.setdefault(method.name, []).append(method)
        self.verdicts: dict[object, bool] = {}
        self.values: dict[object, bool] = {}
        # `from .blocks import ResBlock`: what names the module imports, and who reads those modules
        self.imports = import_table(tree.body)
        self.resolve: Callable[[str], tuple[_Module, str] | None] | None = None
        # options of the checked file read as their default of 0 (a dropout rate the user may raise)
        self.zero_options: frozenset[str] = frozenset()

    def expression(self, node: ast.expr, imported: object = None) -> bool:
        """Whether an expression building a module (``Net(4)``, ``nn.Sequential(...)``) is mode-free."""
        return self._expression(node, imported or self.resolve, _Scope())

    def _expression(self, node: ast.expr, imported: object, scope: _Scope) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and not self._call(sub, imported, True, scope=scope):
                return False
            if isinstance(sub, ast.keyword) and not _keyword_ok(sub, scope.safe):
                return False
        return True

    def _call(self, call: ast.Call, imported: object, constructor: bool, methods: frozenset[str] = frozenset(),
              scope: _Scope | None = None) -> bool:
        scope = scope or _Scope()
        imported = imported or self.resolve
        called = ast_dotted(call.func)
        if called is None and isinstance(call.func, ast.Attribute):
            called = f"().{call.func.attr}"  # `super().__init__()`, `torch.zeros(n).to(device)`
        if called is None and _layer_by_name(call.func, scope):
            return True  # `getattr(nn, activation)(**params)` with `activation="LeakyReLU"`
        if called is None:
            # `getattr(self, name)(x)` outside the constructor calls one of the modules the class
            # builds, each read where it is built (the caller rules out modules passed in)
            return not constructor and (_self_getattr(call.func) or _self_item(call.func, scope))
        short = called.rsplit(".", 1)[-1]
        if short in _INSTANCE_NORMS:
            return not _tracks_stats(call)  # only running statistics make an InstanceNorm mode-dependent
        if called == f"self.{short}" and scope.cls is not None and not constructor and _built_here(scope.cls, short):
            return True  # `self.instance_norm(x)`: that module is read where the class builds it
        if short in _DROPOUTS:
            return _zero_rate(call, scope)  # `nn.Dropout(0.0)`, or a rate every construction leaves at 0
        if short in _WEIGHT_NORMS and call.args and all(isinstance(a, ast.Call) for a in call.args[:1]):
            return True  # `weight_norm(nn.Conv1d(...))`: the same layer, its weight recomputed in both modes
        if _MODE_WORDS.search(short):
            return False
        if short in _MODE_FREE:
            return True
        if "." not in called and short in self.classes:
            return self.mode_free(short, self._bound(call, self.classes[short], scope))
        if constructor and "." not in called and short in self.functions:
            return self._returns_mode_free(short, imported, self.functions[short])  # `conv3x3(4, 8)`
        if constructor and (called in scope.safe or "." not in called and _local(scope, called)
                            or called == f"self.{short}" and scope.cls is not None and short not in methods):
            # a class or module passed in by every construction the file shows (`normalizer(c, n)`),
            # held in an attribute (`self.norm = ConditionalInstanceNorm2d`) or a local
            # (`conv = partial(dilated_conv3x3, dilation=2)`)
            if self._value(ast.Name(id=called) if "." not in called else call.func, scope):
                return True
        if constructor and called == f"self.{short}" and short in self.builders and short not in methods:
            return self._returns_mode_free(short, imported)  # `self.model = self.build_graph()`
        if constructor and callable(imported) and called.count(".") <= 1:
            found = imported(called)
            if found is not None and found[1] in found[0].classes:
                # what the construction binds (its arguments, the defaults it leaves) read here
                return found[0].mode_free(found[1], self._bound(call, found[0].classes[found[1]], scope))
            if found is not None:
                return found[0].mode_free(found[1])
        if called.startswith("self.") and short in methods:
            return True  # `self._make_layer(...)`: its body is read with the class
        return not constructor and not short[:1].isupper() or short in _BUILDS_NOTHING

    def _bound(self, call: ast.Call, cls: ast.ClassDef, scope: _Scope) -> frozenset[str]:
        """The parameters of ``cls.__init__`` that this construction binds to mode-free classes or
        modules, its own arguments or the defaults it leaves (read in the caller's scope)."""
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            return frozenset()
        params = [*init.args.posonlyargs, *init.args.args][1:]
        defaults = dict(_defaults(init))
        given = {p.arg: (a, scope) for p, a in zip(params, call.args)}
        given.update({k.arg: (k.value, scope) for k in call.keywords if k.arg is not None})
        for name, default in defaults.items():
            given.setdefault(name, (default, _Scope()))
        return frozenset(name for name, (value, where) in given.items()
                         if _zero(value) or isinstance(value, ast.Name) and value.id in where.safe
                         or ast_dotted(value) in self.zero_options
                         or isinstance(value, ast.Constant) and value.value in _MODE_FREE
                         or isinstance(value, (ast.Name, ast.Attribute, ast.Call)) and (
                             self._value(value, where)
                             or _ACTIVATION_SLOT.search(name) is not None and not isinstance(value, ast.Call)))

    def _value(self, value: ast.expr, scope: _Scope, depth: int = 0) -> bool:
        """Whether ``value`` is a mode-free module, or a class or builder that makes only such
        modules: what a parameter, attribute or local holding a layer to call may be."""
        if depth > 8:
            return False
        if isinstance(value, ast.Call):
            if ast_dotted(value.func) in ("partial", "functools.partial") and value.args:
                return self._value(value.args[0], scope, depth + 1) and all(_keyword_ok(k, scope.safe)
                                                                          for k in value.keywords)
            return self._expression(value, None, scope)
        name = ast_dotted(value)
        if name is None:
            return False
        if name in scope.safe:
            return True
        short = name.rsplit(".", 1)[-1]
        if name == f"self.{short}" and scope.cls is not None:
            held = _assigned(scope.cls, short)  # every value the class stores in that attribute
            return bool(held) and all(self._value(v, _Scope(scope.cls, m, scope.safe if m.name == "__init__"
                                                            else frozenset()), depth + 1) for v, m in held)
        if "." in name:
            return short in _MODE_FREE  # `nn.Conv2d` passed as the class to build
        if scope.method is not None and _local(scope, name):
            if name in _params(scope.method):
                return False
            held = [v for v in _locals(scope.method, name)]
            return bool(held) and all(self._value(v, scope, depth + 1) for v in held)
        if name in self.classes:
            return self.mode_free(name)
        if name in self.functions:
            return self._returns_mode_free(name, None, self.functions[name])
        return False

    def _returns_mode_free(self, method: str, imported: object,
                           function: ast.FunctionDef | None = None) -> bool:
        """Whether every method of that name in the file returns only mode-free modules (a builder
        method such as ``def build_graph(self): return nn.Sequential(...)``), or the module-level
        ``function`` does (``def conv3x3(i, o): return nn.Conv2d(i, o, 3)``)."""
        key = (f"self.{method}" if function is None else f"def {method}", self.zero_options)
        if key not in self.verdicts:
            self.verdicts[key] = False  # a builder calling itself is not read twice
            bodies = self.builders[method] if function is None else [function]
            returns = [r.value for m in bodies for r in ast.walk(m) if isinstance(r, ast.Return)]
            self.verdicts[key] = bool(returns) and all(
                isinstance(value, ast.Call) and self.expression(value, imported) for value in returns) and all(
                self._builds_only_mode_free(body, imported) for body in bodies)
        return self.verdicts[key]

    def _builds_only_mode_free(self, function: ast.FunctionDef | ast.AsyncFunctionDef, imported: object) -> bool:
        """Whether every call in a builder (a module-level function or a method) is a mode-free
        construction, read like a constructor, and every list it unpacks holds only such calls
        (``layers.append(nn.Dropout(p))`` then ``return nn.Sequential(*layers)`` is read)."""
        scope = _Scope(None, function)
        raised = {id(r.exc) for r in ast.walk(function) if isinstance(r, ast.Raise) and r.exc is not None}
        for sub in ast.walk(function):
            if isinstance(sub, ast.Starred) and not _list_of_calls(function, sub.value) \
                    or isinstance(sub, ast.keyword) and not _keyword_ok(sub, scope.safe):
                return False
            if isinstance(sub, ast.Call) and id(sub) not in raised and not self._call(sub, imported, True,
                                                                                       scope=scope):
                return False
        return True

    def mode_free(self, name: str, safe: frozenset[str] = frozenset()) -> bool:
        key = (name, safe, self.zero_options)
        if key not in self.verdicts:
            self.verdicts[key] = False  # a class that builds itself is not read twice
            self.verdicts[key] = self._read(self.classes[name], safe) if name in self.classes else False
        return self.verdicts[key]

    def _read(self, cls: ast.ClassDef, safe: frozenset[str] = frozenset()) -> bool:
        """Whether ``cls`` is mode-free where its constructor's parameters named in ``safe`` hold
        mode-free classes or modules."""
        for base in cls.bases:
            short = ast_dotted(base)
            if short is None or short.rsplit(".", 1)[-1] != "Module" and not (short in self.classes
                                                                               and self.mode_free(short)):
                return False
        passed_in: set[str] = set()  # `self.backbone = backbone`
        methods = frozenset(m.name for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            building = method.name == "__init__"
            scope = _Scope(cls, method, safe if building else frozenset())
            params = _params(method) - scope.safe
            raised = {id(r.exc) for r in ast.walk(method) if isinstance(r, ast.Raise) and r.exc is not None}
            # defaults of parameters that every construction binds to mode-free values are never used
            unused = {id(n) for p, d in _defaults(method) if p in scope.safe for n in ast.walk(d)}
            unused |= {id(c.func) for c in ast.walk(method) if isinstance(c, ast.Call)}  # read with its call
            # `F.dropout(x, p=self.dropout, training=self.training)` of a rate left at 0: the identity
            quiet = {id(n) for c in ast.walk(method)
                     if isinstance(c, ast.Call) and _zero_functional_dropout(c, cls, safe)
                     for n in ast.walk(c) if n is not c.args[0]} if _mentions_dropout(method) else set()
            for sub in ast.walk(method):
                if id(sub) in quiet:
                    continue
                if isinstance(sub, ast.Name) and sub.id in self.classes and id(sub) not in unused \
                        and sub.id != cls.name and not self.mode_free(sub.id):
                    return False  # a layer class handed to a helper (`self._make_layer(Block, 64)`) is built there
                if isinstance(sub, ast.Attribute) and sub.attr == "training" \
                        or isinstance(sub, ast.Name) and sub.id == "training":
                    return False
                if isinstance(sub, ast.keyword) and not _keyword_ok(sub, scope.safe):
                    return False
                if isinstance(sub, ast.Call) and id(sub) not in raised \
                        and not self._call(sub, None, building, methods, scope):
                    return False
                if building and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name) \
                        and sub.value.id in params:
                    passed_in |= {t.attr for t in sub.targets if isinstance(t, ast.Attribute)}
                if building and isinstance(sub, ast.Starred) and isinstance(sub.value, ast.Name) \
                        and sub.value.id in params:
                    return False  # `nn.Sequential(*layers)` of layers passed in
                if isinstance(sub, ast.Call) and ast_dotted(sub.func) == "setattr" and len(sub.args) == 3 \
                        and not isinstance(sub.args[2], (ast.Call, ast.Constant)) and not (
                            isinstance(sub.args[2], ast.Name) and sub.args[2].id in scope.safe):
                    return False  # `setattr(self, name, block)` of a module passed in or held elsewhere
        # a module passed in (called as `self.backbone(x)`, or through `getattr(self, name)(x)`) may have any layer
        return not any(isinstance(sub, ast.Call) and (
            isinstance(sub.func, ast.Attribute) and sub.func.attr in passed_in
            and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "self"
            or _self_getattr(sub.func) and _may_name(sub.func, passed_in)) for sub in ast.walk(cls))


class _Scope:
    """Where a name is read: the class and method holding it and the constructor parameters that
    hold mode-free classes or modules there."""

    def __init__(self, cls: ast.ClassDef | None = None, method: ast.FunctionDef | ast.AsyncFunctionDef | None = None,
                 safe: frozenset[str] = frozenset()) -> None:
        self.cls, self.method, self.safe = cls, method, safe


def _params(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = method.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self"} \
        | {a.arg for a in (args.vararg, args.kwarg) if a is not None}


def _defaults(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, ast.expr]]:
    """Each parameter with a default, and the default."""
    args = method.args
    positional = [*args.posonlyargs, *args.args]
    pairs = [(p.arg, d) for p, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)]
    return pairs + [(p.arg, d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]


def _local(scope: _Scope, name: str) -> bool:
    """Whether ``name`` is a parameter or assigned local of the scope's method."""
    return scope.method is not None and (name in _params(scope.method) or bool(_locals(scope.method, name)))


def _locals(method: ast.AST, name: str) -> list[ast.expr]:
    """Every value assigned to the local ``name`` (``act = nn.ELU()``, ``self.act = act = nn.ELU()``);
    a loop, ``with`` or augmented binding of it gives an unknown value (an ``ast.Constant``)."""
    held: list[ast.expr] = []
    for sub in ast.walk(method):
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in sub.targets):
            held.append(sub.value)
        elif isinstance(sub, (ast.AnnAssign, ast.AugAssign, ast.For, ast.comprehension, ast.withitem,
                              ast.NamedExpr)) and any(isinstance(t, ast.Name) and t.id == name
                                                      for t in ast.walk(getattr(sub, "target", None)
                                                                        or getattr(sub, "optional_vars", None)
                                                                        or ast.Pass())):
            held.append(ast.Constant(value=None))
        elif isinstance(sub, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) and any(
                isinstance(e, ast.Name) and e.id == name for e in ast.walk(t)) for t in sub.targets):
            held.append(ast.Constant(value=None))
    return held


def _assigned(cls: ast.ClassDef, attr: str) -> list[tuple[ast.expr, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every value a method of ``cls`` stores in ``self.<attr>``, with that method; a store through
    tuple unpacking, ``setattr`` or an augmented assignment gives an unknown value."""
    held = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(method):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
                sub, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) \
                            and t.value.id == "self":
                        direct = target is t and isinstance(sub, ast.Assign)
                        held.append((sub.value if direct else ast.Constant(value=None), method))
    return held


def _built_here(cls: ast.ClassDef, attr: str) -> bool:
    """Whether every store in ``self.<attr>`` is a call in the constructor (read there as a
    construction) rather than a module or class that comes from elsewhere."""
    held = _assigned(cls, attr)
    return bool(held) and all(isinstance(v, ast.Call) and m.name == "__init__" for v, m in held)


_CONTAINERS = {"ModuleList", "ModuleDict", "Sequential"}


def _self_item(func: ast.expr, scope: _Scope) -> bool:
    """``self.convs[i](x)`` of a container the constructor builds and fills only with calls (each
    read as a construction there): ``nn.ModuleList()`` then ``self.convs.append(conv3x3(c, c))``."""
    if not (isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute) and scope.cls is not None
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"):
        return False
    attr = func.value.attr
    held = _assigned(scope.cls, attr)
    if not held or not all(isinstance(v, ast.Call) and m.name == "__init__" and (ast_dotted(v.func) or "").rsplit(
            ".", 1)[-1] in _CONTAINERS and not v.keywords and all(_calls_only(a) for a in v.args) for v, m in held):
        return False
    for sub in ast.walk(scope.cls):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and ast_dotted(
                sub.func.value) == f"self.{attr}":
            if sub.func.attr in ("append", "add_module", "insert"):
                if not sub.args or not isinstance(sub.args[-1], ast.Call) or sub.keywords:
                    return False
            elif sub.func.attr == "extend":
                if len(sub.args) != 1 or not _calls_only(sub.args[0]):
                    return False
            elif sub.func.attr not in ("parameters", "named_parameters", "children", "modules", "__len__"):
                return False
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(isinstance(t, ast.Subscript) and ast_dotted(t.value) == f"self.{attr}"
                   for target in targets for t in ast.walk(target)) and not isinstance(sub.value, ast.Call):
                return False
    return True


def _list_of_calls(function: ast.AST, value: ast.expr) -> bool:
    """Whether ``value`` is a local list the function fills only with calls (each read as a
    construction): ``layers = [nn.Linear(4, 8)]``, ``layers.append(nn.ReLU())``, ``layers += [...]``."""
    if not isinstance(value, ast.Name):
        return False
    name = value.id
    bound = False
    for sub in ast.walk(function):
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(isinstance(t, ast.Name) and t.id == name for target in targets for t in ast.walk(target)):
                if not (len(targets) == 1 and isinstance(targets[0], ast.Name) and sub.value is not None
                        and _calls_only(sub.value)):
                    return False
                bound = True
        elif isinstance(sub, (ast.For, ast.comprehension, ast.withitem, ast.NamedExpr)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(
                    getattr(sub, "target", None) or getattr(sub, "optional_vars", None) or ast.Pass())):
            return False
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                and isinstance(sub.func.value, ast.Name) and sub.func.value.id == name:
            if sub.func.attr in ("append", "insert"):
                if not sub.args or not isinstance(sub.args[-1], ast.Call) or sub.keywords:
                    return False
            elif sub.func.attr == "extend":
                if len(sub.args) != 1 or not _calls_only(sub.args[0]):
                    return False
            else:
                return False
        elif isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == name \
                and isinstance(sub.ctx, ast.Store):
            return False
    return bound


def _calls_only(node: ast.expr) -> bool:
    """A list, tuple or comprehension of calls (``[conv3x3(c, c) for _ in range(n)]``)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(isinstance(e, ast.Call) for e in node.elts)
    return isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, ast.Call)


def _self_getattr(func: ast.expr) -> bool:
    return isinstance(func, ast.Call) and ast_dotted(func.func) == "getattr" and bool(func.args) \
        and isinstance(func.args[0], ast.Name) and func.args[0].id == "self"


def _may_name(getattr_call: ast.Call, attrs: set[str]) -> bool:
    """Whether ``getattr(self, name)`` may fetch one of ``attrs``: a name written as a literal,
    ``'{}_{}_norm'.format(i, j)`` or an f-string reaches only the attributes its fixed parts spell."""
    if not attrs:
        return False
    name = getattr_call.args[1] if len(getattr_call.args) > 1 else None
    if isinstance(name, ast.Call) and isinstance(name.func, ast.Attribute) and name.func.attr == "format" \
            and isinstance(name.func.value, ast.Constant) and isinstance(name.func.value.value, str):
        pattern = ".*".join(re.escape(part) for part in re.split(r"\{[^{}]*\}", name.func.value.value))
    elif isinstance(name, ast.JoinedStr):
        pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".*" for v in name.values)
    elif isinstance(name, ast.Constant) and isinstance(name.value, str):
        pattern = re.escape(name.value)
    else:
        return True
    return any(re.fullmatch(pattern, attr) for attr in attrs)


def _tracks_stats(call: ast.Call) -> bool:
    """Whether an ``InstanceNorm*d(...)`` keeps running statistics (``track_running_stats=True``,
    the fifth positional argument): then eval mode normalises with them."""
    values = [k.value for k in call.keywords if k.arg == "track_running_stats"] + call.args[4:5]
    if any(k.arg is None for k in call.keywords):
        return True
    return any(not (isinstance(v, ast.Constant) and v.value in (False, None, 0)) for v in values)


def _keyword_ok(keyword: ast.keyword, safe: frozenset[str] = frozenset()) -> bool:
    """``dropout=0.0`` is fine, and so is ``dropout=rate`` of a parameter every construction leaves
    at 0; ``dropout=p``, ``training=True`` are not."""
    if keyword.arg is None:
        return True
    if keyword.arg == "training":
        return False
    if "drop" in keyword.arg.lower():
        return isinstance(keyword.value, ast.Constant) and keyword.value.value in (0, 0.0, None, False) \
            or isinstance(keyword.value, ast.Name) and keyword.value.id in safe
    return True


def _layer_by_name(func: ast.expr, scope: _Scope) -> bool:
    """``getattr(nn, name)`` of a mode-free layer's name: a literal, or a constructor parameter every
    construction binds to one (``kpnet_nonlinear_activation="LeakyReLU"``)."""
    if not (isinstance(func, ast.Call) and ast_dotted(func.func) == "getattr" and len(func.args) == 2
            and ast_dotted(func.args[0]) in ("nn", "torch.nn")):
        return False
    name = func.args[1]
    return isinstance(name, ast.Constant) and name.value in _MODE_FREE \
        or isinstance(name, ast.Name) and name.id in scope.safe


_FUNCTIONAL_DROPOUTS = {"F.dropout", "nn.functional.dropout", "torch.nn.functional.dropout", "torch.dropout",
                        "dropout", "functional.dropout"}


def _mentions_dropout(method: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "dropout" or isinstance(n, ast.Name) and n.id == "dropout"
               for n in ast.walk(method))


def _zero_functional_dropout(call: ast.Call, cls: ast.ClassDef, safe: frozenset[str]) -> bool:
    """``F.dropout(x, p=self.dropout, training=self.training)`` whose rate is 0 as every construction
    leaves it: a literal, or an attribute the constructor sets only from a parameter bound to 0."""
    if ast_dotted(call.func) not in _FUNCTIONAL_DROPOUTS or not call.args or isinstance(call.args[0], ast.Starred):
        return False
    rate = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "p"), None)
    if rate is None:
        return False  # the default rate is 0.5
    if _zero(rate):
        return True
    name = ast_dotted(rate)
    if name is None or not name.startswith("self.") or name.count(".") != 1:
        return False
    held = _assigned(cls, name[5:])
    return bool(held) and all(m.name == "__init__" and (_zero(v) or isinstance(v, ast.Name) and v.id in safe)
                              for v, m in held)


def _zero(value: ast.expr) -> bool:
    """A literal rate of 0 (``0``, ``0.0``; not ``False``)."""
    return isinstance(value, ast.Constant) and type(value.value) in (int, float) and value.value == 0


def _zero_rate(call: ast.Call, scope: _Scope) -> bool:
    """``nn.Dropout(0.0)``, ``nn.Dropout(p=rate)`` with ``rate`` a constructor parameter every
    construction the code shows leaves at 0 (a default ``kpnet_dropout=0.0`` no caller passes):
    dropout with rate 0 is the identity in both modes."""
    rate = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "p"), None)
    return rate is not None and (_zero(rate) or isinstance(rate, ast.Name) and rate.id in scope.safe)
