"""LC205 on an autocast that an option picks: a dict of contexts indexed by a precision option, a
conditional expression, a device type computed as "cuda" or "cpu"."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source
from loopcheck.model.roles import Role, Roles

LOOP = """
import contextlib
import torch

def train(args, model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        with {context}:
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""

PRECISIONS = ('{{"bf16": torch.autocast("cuda", dtype=torch.bfloat16), '
              '"fp16": torch.autocast("cuda", dtype=torch.float16), "fp32": contextlib.nullcontext()}}[{key}]')


def lc205(source: str) -> list[int]:
    return [f.line for f in check_source(source, "train.py", select=["LC205"])]


def test_a_precision_option_that_can_pick_float16_is_reported() -> None:
    assert lc205(LOOP.format(context=PRECISIONS.format(key="args.precision"))) == [8]


def test_a_literal_key_runs_only_its_own_entry() -> None:
    assert lc205(LOOP.format(context=PRECISIONS.format(key='"bf16"'))) == []
    assert lc205(LOOP.format(context=PRECISIONS.format(key='"fp16"'))) == [8]


def test_choices_without_float16_are_not_reported() -> None:
    context = '{"bf16": torch.autocast("cuda", dtype=torch.bfloat16), "fp32": contextlib.nullcontext()}[args.precision]'
    assert lc205(LOOP.format(context=context)) == []


def test_a_conditional_float16_autocast_is_reported() -> None:
    assert lc205(LOOP.format(context='torch.autocast("cuda") if args.amp else contextlib.nullcontext()')) == [8]
    assert lc205(LOOP.format(context='torch.autocast("cuda", dtype=torch.bfloat16) if args.amp '
                                     'else contextlib.nullcontext()')) == []


def test_a_device_type_computed_as_cuda_autocasts_to_float16() -> None:
    source = LOOP.format(context="torch.autocast(device_type=device_type)")
    cuda_or_cpu = 'device_type = "cuda" if torch.cuda.is_available() else "cpu"\n'
    assert lc205(cuda_or_cpu + source) == [9]
    assert lc205('device_type = "cpu"\n' + source) == []
    assert lc205(LOOP.format(context="torch.autocast(device_type=x.device.type)")) == []


def test_a_grad_scaler_keeps_a_chosen_float16_autocast_silent() -> None:
    source = LOOP.format(context=PRECISIONS.format(key="args.precision")).replace(
        "        loss.backward()\n        optimizer.step()\n",
        "        scaler.scale(loss).backward()\n        scaler.step(optimizer)\n        scaler.update()\n")
    source = source.replace("def train(", 'scaler = torch.amp.GradScaler("cuda")\n\ndef train(')
    assert lc205(source) == []


UNDERFLOW = ("and its loss is back-propagated without a GradScaler: small gradients underflow to zero "
             "(use GradScaler, or bfloat16)")


def lc205_messages(source: str) -> list[str]:
    return [f.message for f in check_source(source, "train.py", select=["LC205"])]


def test_the_message_says_float16_is_certain_only_where_nothing_else_picks_it() -> None:
    assert lc205_messages(LOOP.format(context='torch.autocast("cuda")')) == [
        f"the forward runs under float16 autocast {UNDERFLOW}"]
    assert lc205_messages(LOOP.format(context=PRECISIONS.format(key='"fp16"'))) == [
        f"the forward runs under float16 autocast {UNDERFLOW}"]


def test_the_message_names_the_option_or_device_that_picks_float16() -> None:
    assert lc205_messages(LOOP.format(context=PRECISIONS.format(key="args.precision"))) == [
        f'the forward may run under float16 autocast (when `args.precision` is "fp16") {UNDERFLOW}']
    assert lc205_messages(LOOP.format(context='torch.autocast("cuda") if args.amp else contextlib.nullcontext()')) == [
        f"the forward may run under float16 autocast (when `args.amp` holds) {UNDERFLOW}"]
    assert lc205_messages(LOOP.format(context='torch.autocast("cuda", enabled=args.amp)')) == [
        f"the forward may run under float16 autocast (when `args.amp` holds) {UNDERFLOW}"]
    assert lc205_messages(LOOP.format(context="torch.cuda.amp.autocast(args.use_amp)")) == [
        f"the forward may run under float16 autocast (when `args.use_amp` holds) {UNDERFLOW}"]
    cuda_or_cpu = 'device_type = "cuda" if torch.cuda.is_available() else "cpu"\n'
    assert lc205_messages(cuda_or_cpu + LOOP.format(context="torch.autocast(device_type=device_type)")) == [
        f'the forward may run under float16 autocast (when `device_type` is "cuda") {UNDERFLOW}']
    # a device type assigned only "cuda" is no choice
    cuda = 'device_type = "cuda"\n'
    assert lc205_messages(cuda + LOOP.format(context="torch.autocast(device_type=device_type)")) == [
        f"the forward runs under float16 autocast {UNDERFLOW}"]


GATED = """
import torch

class Trainer:
    def train_one_batch(self, x, y):
        self.optimizer.zero_grad()
        if self.mixed_precision:
            with torch.autocast(device_type="cuda"):
                out = self.model(x)
        else:
            out = self.model(x)
        loss = self.criterion(out, y)
        loss.backward()
        self.optimizer.step()

    def train(self, loader):
        for x, y in loader:
            self.train_one_batch(x, y)
"""


def test_the_message_names_the_branch_that_opens_the_autocast() -> None:
    # neuraloperator's Trainer: `if self.mixed_precision: with torch.autocast(...)`, off by default
    assert lc205_messages(GATED) == [
        f"the forward may run under float16 autocast (when `self.mixed_precision` holds) {UNDERFLOW}"]
    negated = GATED.replace("if self.mixed_precision:\n            with torch.autocast(device_type=\"cuda\"):\n"
                            "                out = self.model(x)\n        else:\n            out = self.model(x)\n",
                            "if self.full_precision:\n            out = self.model(x)\n        else:\n"
                            "            with torch.autocast(device_type=\"cuda\"):\n                out = self.model(x)\n")
    assert negated != GATED
    assert lc205_messages(negated) == [
        f"the forward may run under float16 autocast (when `self.full_precision` does not hold) {UNDERFLOW}"]
    # only the branch that opens the `with` itself decides: an outer `if` around a loop does not
    outer = LOOP.format(context='torch.autocast("cuda")').replace(
        "    for x, y in loader:\n", "    if args.train:\n     for x, y in loader:\n")
    assert lc205_messages(outer) == [f"the forward runs under float16 autocast {UNDERFLOW}"]


def test_a_scaler_known_by_what_is_done_with_it_keeps_float16_silent() -> None:
    # LSGM hands its GradScaler in as `grad_scalar`: its scale, step and update say what it is
    fixture = Path(__file__).parent / "fixtures" / "must_not_flag" / "fp16_grad_scaler_passed_in_under_another_name.py"
    source = fixture.read_text()
    assert lc205(source) == []
    # the same loop back-propagating and stepping directly has nothing that scales its loss
    plain = source.replace("grad_scalar.scale(q_loss).backward(", "q_loss.backward(") \
        .replace("grad_scalar.scale(p_loss).backward()", "p_loss.backward()") \
        .replace("grad_scalar.step(vae_optimizer)", "vae_optimizer.step()") \
        .replace("grad_scalar.step(dae_optimizer)", "dae_optimizer.step()") \
        .replace("            grad_scalar.unscale_(dae_optimizer)\n", "").replace("        grad_scalar.update()\n", "")
    assert "grad_scalar.scale" not in plain and "grad_scalar.update" not in plain
    assert lc205(plain) == [13]
    # a name used for something else that is also scaled and updated (a dict of logged scalars) is no scaler
    assert role_of_use({"update", "items"}) is False and role_of_use({"scale", "step", "update"}) is True


def role_of_use(methods: set[str]) -> bool:
    """Whether the roles table reads a parameter on which the file calls ``methods`` as a GradScaler."""
    roles = Roles(methods_called={"thing": methods})
    return roles.of("thing") is Role.SCALER
