"""What an object is, read from what the file binds its name to rather than from the name: an
alias, a branch of a conditional expression, a class held in a name, a function or method of the
file that returns it, an element of a tuple such a function returns."""

from __future__ import annotations

import ast
import textwrap

from loopcheck.engine import check_source
from loopcheck.model.from_ast import module as module_of
from loopcheck.model.index import index_module
from loopcheck.model.roles import Role, Roles, role_of_constructor


def roles(code: str) -> Roles:
    code = textwrap.dedent(code)
    return index_module(module_of(ast.parse(code), code)).roles


def test_an_alias_takes_the_role_of_what_it_names() -> None:
    r = roles("""
        class T:
            def __init__(self, m):
                self.w = torch.optim.SGD(m.parameters(), lr=0.1)
            def fit(self):
                a = self.w
                b = a
                c = self.optimizers[0]
                d = self.model
    """)
    assert r.of("a") is Role.OPTIMIZER  # through self.w's constructor
    assert r.of("b") is Role.OPTIMIZER  # an alias of an alias
    assert r.of("c") is Role.OPTIMIZER  # an element of a container named for what it holds
    assert r.of("d") is Role.UNKNOWN


def test_aliases_that_name_each_other_end() -> None:
    r = roles("""
        a = b
        b = a
        optimizer = self.optimizer
        self.optimizer = optimizer
    """)
    assert r.of("a") is Role.UNKNOWN
    assert r.of("optimizer") is Role.OPTIMIZER  # its own name, as before


def test_a_conditional_scaler_is_a_scaler_that_may_be_none() -> None:
    r = roles("""
        g = torch.cuda.amp.GradScaler() if use_amp else None
        h = None if off else (GradScaler() if fp16 else torch.cuda.amp.GradScaler(enabled=False))
        k = GradScaler() if use_amp else nullcontext()
    """)
    assert r.of("g") is Role.SCALER and "g" in r.maybe_none
    assert r.of("h") is Role.SCALER and len(r.constructors("h", Role.SCALER)) == 2
    assert r.of("k") is Role.SCALER and "k" not in r.maybe_none


def test_a_class_held_in_a_name_builds_its_role() -> None:
    r = roles("""
        k = torch.optim.AdamW
        a = k(model.parameters(), lr=1e-3)
        table = {"adam": optim.Adam, "sgd": functools.partial(optim.SGD, momentum=0.9)}
        b = table[name](model.parameters())
        mixed = {"adam": optim.Adam, "net": Net}
        c = mixed[name](model.parameters())
        f = get_optimizer(cfg)
        d = f(model.parameters())
        self.cls = torch.optim.Adam
        e = self.cls(model.parameters())
    """)
    assert r.of("a") is Role.OPTIMIZER
    assert r.of("b") is Role.OPTIMIZER
    assert r.of("c") is Role.UNKNOWN  # a table of classes that build different things
    assert r.of("d") is Role.OPTIMIZER  # an optimizer class from a factory of optimizers
    assert r.of("e") is Role.OPTIMIZER


def test_a_function_of_the_file_that_returns_the_object() -> None:
    r = roles("""
        class Exp:
            def _select(self):
                w = optim.Adam(self.model.parameters(), lr=1e-3)
                return w
            def _loss(self):
                return nn.MSELoss()
            def train(self):
                a = self._select()
                b = self._loss()

        def either(flag, params):
            if flag:
                return torch.optim.SGD(params, lr=0.1)
            return None

        def two_kinds(flag, params):
            if flag:
                return torch.optim.SGD(params, lr=0.1)
            return torch.optim.lr_scheduler.StepLR(x, 1)

        c = either(True, m.parameters())
        d = two_kinds(True, m.parameters())
    """)
    assert r.of("a") is Role.OPTIMIZER
    assert r.of("b") is Role.UNKNOWN
    assert r.of("c") is Role.OPTIMIZER  # a `return None` branch is no other role
    assert r.of("d") is Role.UNKNOWN  # returns disagree


def test_elements_of_a_tuple_a_function_of_the_file_returns() -> None:
    r = roles("""
        def build(args, model):
            p = optim.AdamW(model.parameters(), lr=args.lr)
            q = optim.lr_scheduler.OneCycleLR(p, args.lr, 100)
            return p, q

        def starred(model):
            return (*parts, model)

        m, n = build(args, model)
        s, t = starred(model)
        x, y = elsewhere(args)
    """)
    assert (r.of("m"), r.of("n")) == (Role.OPTIMIZER, Role.SCHEDULER)
    assert r.of("s") is Role.UNKNOWN and r.of("x") is Role.UNKNOWN


def test_a_foreign_framework_optimizer_stays_unknown_through_an_alias() -> None:
    r = roles("""
        optimizer = paddle.optimizer.Momentum(learning_rate=0.1)
        a = optimizer
    """)
    assert r.of("optimizer") is Role.UNKNOWN
    assert r.of("a") is Role.UNKNOWN


def test_a_class_named_as_an_optimizer_is_one() -> None:
    assert role_of_constructor("nanotron.optim.NamedOptimizer") is Role.OPTIMIZER
    assert role_of_constructor("optimizer_builder") is Role.UNKNOWN



def test_torchs_swa_scheduler_is_a_scheduler() -> None:
    # `swa_sched = torch.optim.swa_utils.SWALR(opt, swa_lr=4e-4)`: under torch.optim, but no optimizer
    assert role_of_constructor("torch.optim.swa_utils.SWALR") is Role.SCHEDULER
    assert role_of_constructor("SWALR") is Role.SCHEDULER
    source = """
import torch
from torch.optim.swa_utils import SWALR
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
swa_sched = SWALR(opt, swa_lr=4e-4)
for epoch in range(30):
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if epoch >= 20:
        swa_sched.step()
"""
    assert [f.code for f in check_source(source) if f.code == "LC103"] == []

_MAYBE_NONE = '''
import torch
from torch import nn


def train(model, feed, amp, epochs=3):
    w = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.amp.GradScaler("cuda") if amp else None
    for epoch in range(epochs):
        for x, y in feed:
            w.zero_grad()
            out = nn.functional.mse_loss(model(x), y)
            if amp:
                g.scale(out).backward()
            else:
                out.backward()
            w.step()
'''


def test_no_scaler_step_fix_where_the_scaler_may_be_none() -> None:
    from loopcheck.engine import check_source

    def lc203(code: str) -> list[object]:
        return [f for f in check_source(code, filename="t.py", select=["LC203"]) if f.code == "LC203"]

    [outside] = lc203(_MAYBE_NONE)  # the step runs without amp too, where `g` is None
    assert outside.fix_message is None
    [inside] = lc203(_MAYBE_NONE.replace("            else:\n                out.backward()\n            w.step()",
                                         "                w.step()"))
    assert inside.fix_message == "step through `g.step(w)`"
    [named] = lc203(_MAYBE_NONE.replace('torch.amp.GradScaler("cuda") if amp else None', 'torch.amp.GradScaler("cuda")'))
    assert named.fix_message == "step through `g.step(w)`"  # a scaler that is never None


def test_aliases_must_agree_and_a_class_built_name_is_no_alias() -> None:
    r = roles("""
        def fit(self):
            a = self.w1
            a = self.w2
            model = Net()
        def evaluate(self):
            model = self.ema_model
            b = self.optimizer
            b = self.lr_scheduler
        self.w1 = torch.optim.SGD(p, lr=0.1)
        self.w2 = torch.optim.Adam(p)
    """)
    assert r.of("a") is Role.OPTIMIZER  # two optimizers
    assert r.of("model") is Role.UNKNOWN  # a model the file builds, aliased to its EMA elsewhere
    assert r.of("b") is Role.UNKNOWN  # an optimizer here, a scheduler there
