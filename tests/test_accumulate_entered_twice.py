"""``accelerator.accumulate()`` entered more than once on every micro-batch counts each entry toward
``gradient_accumulation_steps`` (run on CPU: ``benchmarks/results/accelerate-accumulate-twice-s31``),
whether in one ``with`` or in two blocks in a row; one entry with every model does not. The finding
names the option N is: at N = 1 every micro-batch steps either way."""

from __future__ import annotations

from loopcheck.engine import check_source

LOOP = """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
unet, text_encoder, optimizer, loader = accelerator.prepare(unet, text_encoder, optimizer, loader)
for epoch in range(args.epochs):
    for batch in loader:
{body}
"""
ONE_WITH = """        with accelerator.accumulate(unet), accelerator.accumulate(text_encoder):
            accelerator.backward(loss_of(unet, text_encoder, batch))
            optimizer.step()
            optimizer.zero_grad()"""
TWO_BLOCKS = """        with accelerator.accumulate(unet):
            accelerator.backward(unet_loss(unet, batch))
        with accelerator.accumulate(text_encoder):
            accelerator.backward(text_loss(text_encoder, batch))
            optimizer.step()
            optimizer.zero_grad()"""
ONCE = """        with accelerator.accumulate(unet, text_encoder):
            accelerator.backward(loss_of(unet, text_encoder, batch))
            optimizer.step()
            optimizer.zero_grad()"""


def _entered(body: str) -> list[str]:
    return [f.message for f in check_source(LOOP.format(body=body), select=["LC106"])]


def test_two_entries_in_one_with_are_counted_twice() -> None:
    (message,) = _entered(ONE_WITH)
    assert "entered 2 times on every micro-batch" in message
    assert "with N a multiple of 2, the optimizer steps every N/2 micro-batches" in message
    assert "`accelerator.accumulate(unet, text_encoder)`" in message
    assert message.endswith("(only when `args.gradient_accumulation_steps` > 1)")


def test_two_blocks_in_a_row_are_counted_twice() -> None:
    (message,) = _entered(TWO_BLOCKS)
    assert "entered 2 times on every micro-batch" in message
    # (benchmarks/results/accelerate-accumulate-in-a-row-s33: with N = 4 the first block never syncs)
    assert "the optimizers of the blocks before the last never step" in message


def test_one_entry_with_every_model_is_counted_once() -> None:
    assert _entered(ONCE) == []


def test_a_count_that_is_a_parameter_with_a_default_is_named() -> None:
    """``def main(..., gradient_accumulation_steps: int = 1)`` called with a configuration's keys
    (Text-To-Video-Finetuning's ``main(**OmegaConf.load(config))``): the note names the parameter and
    its default, as it does for a step condition's count."""
    source = ("def main(unet, text_encoder, optimizer, loader, gradient_accumulation_steps: int = 1):\n"
              "    accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)\n"
              "    for batch in loader:\n"
              "        with accelerator.accumulate(unet), accelerator.accumulate(text_encoder):\n"
              "            accelerator.backward(loss_of(unet, text_encoder, batch))\n"
              "            optimizer.step()\n"
              "            optimizer.zero_grad()\n")
    (finding,) = check_source(source, select=["LC106"])
    assert finding.message.endswith("(only when `gradient_accumulation_steps` > 1; its default is 1)")
