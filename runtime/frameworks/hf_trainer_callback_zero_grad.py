"""HF Trainer with gradient_accumulation_steps=4 and a callback that zeroes the gradients after
every micro-batch that does not step: only the last micro-batch of each window reaches the
optimizer.
framework-expect: steps 3, per-step 4"""
from hf_common import train
from transformers import TrainerCallback


class ResetGradients(TrainerCallback):
    def on_substep_end(self, args, state, control, model=None, **kwargs):
        model.zero_grad()  # expect: LC101


result = train(callbacks=[ResetGradients()])
print(f"steps {result.global_step} loss {result.training_loss:.6f}")
