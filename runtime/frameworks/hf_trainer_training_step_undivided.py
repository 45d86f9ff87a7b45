"""HF Trainer with gradient_accumulation_steps=4 and a training_step override that calls
backward on the model's mean loss without dividing it by the 4 micro-batches of a step (the
Trainer's own training_step divides; an override has to do it itself): every update is 4x.
framework-expect: steps 3, per-step 4"""
from hf_common import train
from transformers import Trainer


class PlainBackwardTrainer(Trainer):
    def training_step(self, model, inputs, num_items_in_batch=None):
        model.train()
        loss = model(**self._prepare_inputs(inputs)).loss
        loss.backward()  # expect: LC102
        return loss.detach()


result = train(PlainBackwardTrainer)
print(f"steps {result.global_step} loss {result.training_loss:.6f}")
