"""The HF Trainer callback pitfall (gradients zeroed after every micro-batch that does not step)
under `loopcheck.runtime.watch()` around `trainer.train()` instead of `loopcheck run`; the
report goes to the path given as the first argument.
framework-expect: steps 3, per-step 4, scheduler LambdaLR 3"""
import sys

from hf_common import train
from transformers import TrainerCallback

from loopcheck.runtime import watch


class ResetGradients(TrainerCallback):
    def on_substep_end(self, args, state, control, model=None, **kwargs):
        model.zero_grad()  # expect: LC101


with watch(report=sys.argv[1]):
    result = train(callbacks=[ResetGradients()])
print(f"steps {result.global_step} loss {result.training_loss:.6f}")
