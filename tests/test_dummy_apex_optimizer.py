"""An optimizer built with ``lr=0`` only so apex's ``amp.initialize`` can cast a momentum encoder
trains nothing: the encoder it is built over may stay in eval mode (CMC, MoCo, GCC)."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "momentum_encoder_dummy_apex_optimizer_eval.py"


def lc605(source: str) -> list[int]:
    return [f.line for f in check_source(source, "train_moco.py", select=["LC605"])]


def test_the_momentum_encoder_of_a_zero_rate_apex_optimizer_is_not_trained() -> None:
    assert lc605(FIXTURE.read_text()) == []


def test_an_encoder_whose_optimizer_has_a_rate_is_trained() -> None:
    source = FIXTURE.read_text().replace("model_ema.parameters(), lr=0,", "model_ema.parameters(), lr=args.lr_ema,")
    assert source != FIXTURE.read_text()
    assert lc605(source) == [18]  # model_ema.eval() and no model_ema.train() before its next step


def test_a_zero_rate_without_apex_still_trains_the_module() -> None:
    # a scheduler may raise a rate built as 0 (the Annotated Transformer's NoamOpt): only apex's
    # casting optimizer is known to train nothing
    source = FIXTURE.read_text().split("\n", 1)[1].replace("from apex import amp\n", "")
    source = source.replace("    model, optimizer = amp.initialize(model, optimizer, opt_level=\"O2\")\n", "")
    source = source.replace("    model_ema, optimizer_ema = amp.initialize(model_ema, optimizer_ema, opt_level=\"O2\")\n",
                            "    run(model_ema, optimizer_ema)\n")
    source = source.replace("        with amp.scale_loss(loss, optimizer) as scaled_loss:\n"
                            "            scaled_loss.backward()\n", "        loss.backward()\n")
    assert "amp.initialize(" not in source and "amp.scale_loss" not in source
    assert lc605(source) == [16]
