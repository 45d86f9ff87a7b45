"""Whether a module computes the same thing in train and eval mode, as far as the code shows it.

Eval mode changes only layers that read ``self.training``: dropout, BatchNorm, spectral norm and
the like. A model whose every layer the checked file (or a project module it imports directly)
builds from plain layers (``nn.Linear``, ``nn.Conv2d``, ``nn.LayerNorm``, ...) trains the same in
both modes, so leaving it in eval mode is inert. Anything the code does not show (a hub
checkpoint, a torchvision constructor, a module passed in, a class of a module imported further
away) counts as mode-dependent. One library model is known: a diffusers
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
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, is_zero, last_part, source
from loopcheck.project.facts import ast_dotted

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
                   "min", "sum", "getattr", "hasattr", "format", "items", "keys", "values"}
_MODE_WORDS = re.compile(r"dropout|drop_?path|batch_?norm|instance_?norm|rrelu|stochastic_depth|spectral_norm", re.I)
_MOVES = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_", "type"}
_WRAPPERS = {"DDP", "DistributedDataParallel", "DataParallel", "FSDP", "FullyShardedDataParallel", "compile",
             "get_peft_model", "prepare", "unwrap_model"}
# library models known to hold no mode-dependent layer: only the file can add one (an adapter's dropout)
_KNOWN_MODE_FREE = {"UNet2DConditionModel"}


def mode_matters(model: FileModel, name: str) -> bool:
    """False only when every construction of ``name`` the file shows builds a mode-free module."""
    calls = model.index.roles.constructed.get(last_part(name), [])
    if not calls:
        return True
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
                return True
            continue
        checker = checker or _Checker(model)
        if not checker.call(call):
            return True
    # only moves and wrappers (`self.model = self.model.to(device)` of a model passed in or returned
    # by a helper): the module inside is unknown
    return not built


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
    """Reads the classes the file and its directly imported project modules define (stdlib ``ast``)."""

    def __init__(self, model: FileModel) -> None:
        self.model = model
        self.own = _Module(model.source or model.module.code)

    def call(self, call: cst.Call) -> bool:
        """Whether the module this call builds is mode-free."""
        try:
            node = ast.parse(source(call), mode="eval").body
        except SyntaxError:
            return False
        return self.own.expression(node, self._imported)

    def _imported(self, called: str) -> tuple[_Module, str] | None:
        """The project module and class name behind ``Net`` / ``models.Net`` imported by the file."""
        project = self.model.project
        if project is None:
            return None
        local, _, attr = called.partition(".")
        imported = project.own.imports.get(local)
        if imported is None or "." in attr:
            return None
        module, name, level = imported
        if attr:  # `import models` then `models.Net(...)`
            target, cls = (f"{module}.{name}" if module and name else (name or module)), attr
        else:  # `from models import Net`
            target, cls = module, name
        path = project.index.resolve(project.path, target, level)
        if path is None:
            return None
        try:
            return _Module(path.read_text(encoding="utf-8", errors="replace")), cls
        except OSError:
            return None


class _Module:
    def __init__(self, text: str) -> None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = ast.Module(body=[], type_ignores=[])
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.builders: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}  # methods, by name
        for cls in self.classes.values():
            for method in cls.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.builders.setdefault(method.name, []).append(method)
        self.verdicts: dict[str, bool] = {}

    def expression(self, node: ast.expr, imported: object = None) -> bool:
        """Whether an expression building a module (``Net(4)``, ``nn.Sequential(...)``) is mode-free."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and not self._call(sub, imported, constructor=True):
                return False
            if isinstance(sub, ast.keyword) and not _keyword_ok(sub):
                return False
        return True

    def _call(self, call: ast.Call, imported: object, constructor: bool, methods: frozenset[str] = frozenset()
              ) -> bool:
        called = ast_dotted(call.func)
        if called is None and isinstance(call.func, ast.Attribute):
            called = f"().{call.func.attr}"  # `super().__init__()`, `torch.zeros(n).to(device)`
        if called is None:
            return False  # `getattr(nn, act)()`: any layer
        short = called.rsplit(".", 1)[-1]
        if _MODE_WORDS.search(short):
            return False
        if short in _MODE_FREE:
            return True
        if "." not in called and short in self.classes:
            return self.mode_free(short)
        if constructor and called == f"self.{short}" and short in self.builders and short not in methods:
            return self._returns_mode_free(short, imported)  # `self.model = self.build_graph()`
        if constructor and callable(imported) and called.count(".") <= 1:
            found = imported(called)
            if found is not None:
                return found[0].mode_free(found[1])
        if called.startswith("self.") and short in methods:
            return True  # `self._make_layer(...)`: its body is read with the class
        return not constructor and not short[:1].isupper() or short in _BUILDS_NOTHING

    def _returns_mode_free(self, method: str, imported: object) -> bool:
        """Whether every method of that name in the file returns only mode-free modules (a builder
        method such as ``def build_graph(self): return nn.Sequential(...)``)."""
        key = f"self.{method}"
        if key not in self.verdicts:
            self.verdicts[key] = False  # a builder calling itself is not read twice
            returns = [r.value for m in self.builders[method] for r in ast.walk(m) if isinstance(r, ast.Return)]
            self.verdicts[key] = bool(returns) and all(
                isinstance(value, ast.Call) and self.expression(value, imported) for value in returns)
        return self.verdicts[key]

    def mode_free(self, name: str) -> bool:
        if name not in self.verdicts:
            self.verdicts[name] = False  # a class that builds itself is not read twice
            self.verdicts[name] = self._read(self.classes[name]) if name in self.classes else False
        return self.verdicts[name]

    def _read(self, cls: ast.ClassDef) -> bool:
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
            params = {a.arg for a in [*method.args.args, *method.args.kwonlyargs]} - {"self"}
            for sub in ast.walk(method):
                if isinstance(sub, ast.Attribute) and sub.attr == "training" \
                        or isinstance(sub, ast.Name) and sub.id == "training":
                    return False
                if isinstance(sub, ast.keyword) and not _keyword_ok(sub):
                    return False
                if isinstance(sub, ast.Call) and not self._call(sub, None, building, methods):
                    return False
                if building and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name) \
                        and sub.value.id in params:
                    passed_in |= {t.attr for t in sub.targets if isinstance(t, ast.Attribute)}
                if building and isinstance(sub, ast.Starred) and isinstance(sub.value, ast.Name) \
                        and sub.value.id in params:
                    return False  # `nn.Sequential(*layers)` of layers passed in
        # a module passed in (called as `self.backbone(x)`) may have any layer
        return not any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in passed_in
                       and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "self" for sub in ast.walk(cls))


def _keyword_ok(keyword: ast.keyword) -> bool:
    """``dropout=0.0`` is fine; ``dropout=p``, ``training=True`` are not."""
    if keyword.arg is None:
        return True
    if keyword.arg == "training":
        return False
    if "drop" in keyword.arg.lower():
        return isinstance(keyword.value, ast.Constant) and keyword.value.value in (0, 0.0, None, False)
    return True
