"""LC107: a clip of one module after other optimizers stepped, before the step of the optimizer
built over it by an optimizer class an option chooses (`args.optimizer(self.map_style.parameters())`)."""
from __future__ import annotations

from loopcheck.engine import check_source

SPEAKER = '''
import torch


class Speaker:
    def __init__(self, args, encoder, decoder, map_style):
        self.encoder, self.decoder, self.map_style = encoder, decoder, map_style
        self.encoder_optimizer = args.optimizer(self.encoder.parameters(), lr=args.lr)
        self.decoder_optimizer = args.optimizer(self.decoder.parameters(), lr=args.lr)
        self.map_style_optimizer = args.optimizer(self.map_style.parameters(), lr=args.lr)

    def train(self, iters):
        for i in range(iters):
            self.encoder_optimizer.zero_grad()
            self.decoder_optimizer.zero_grad()
            self.map_style_optimizer.zero_grad()
            loss = self.teacher_forcing()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.encoder.parameters(), 40.)
            torch.nn.utils.clip_grad_norm_(self.decoder.parameters(), 40.)
            self.encoder_optimizer.step()
            self.decoder_optimizer.step()
            torch.nn.utils.clip_grad_norm_(self.map_style.parameters(), 40.)
            self.map_style_optimizer.step()
'''


def _lc107(source: str) -> list[int]:
    return [f.line for f in check_source(source, filename="speaker.py", select=["LC107"])]


def test_a_clip_before_its_own_optimizers_step_is_silent():
    assert _lc107(SPEAKER) == []


def test_a_clip_after_its_own_optimizers_step_is_flagged():
    late = SPEAKER.replace("            torch.nn.utils.clip_grad_norm_(self.map_style.parameters(), 40.)\n"
                           "            self.map_style_optimizer.step()\n",
                           "            self.map_style_optimizer.step()\n"
                           "            torch.nn.utils.clip_grad_norm_(self.map_style.parameters(), 40.)\n")
    assert _lc107(late) == [24]
