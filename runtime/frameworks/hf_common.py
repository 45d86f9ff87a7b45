"""What the HF Trainer scenarios share: a tiny GPT-2 from a config, 24 random sequences,
micro-batch 2 and gradient_accumulation_steps=4 (3 optimizer steps), on the CPU."""
from __future__ import annotations

import tempfile

import cpu_torchvision  # noqa: F401  (first: transformers imports torchvision)
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


def model_and_data() -> tuple[GPT2LMHeadModel, list[dict[str, torch.Tensor]]]:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 64, (24, 8))
    return GPT2LMHeadModel(config), [{"input_ids": row, "labels": row} for row in ids]


def train(trainer_class: type[Trainer] = Trainer, callbacks: list | None = None, **overrides):
    model, data = model_and_data()
    with tempfile.TemporaryDirectory() as out:
        options = dict(output_dir=out, per_device_train_batch_size=2, gradient_accumulation_steps=4,
                       num_train_epochs=1, learning_rate=1e-3, warmup_steps=1, lr_scheduler_type="linear",
                       logging_strategy="no", save_strategy="no", report_to=[], use_cpu=True,
                       disable_tqdm=True, dataloader_num_workers=0, seed=0)
        options.update(overrides)
        trainer = trainer_class(model=model, args=TrainingArguments(**options), train_dataset=data,
                                callbacks=callbacks)
        return trainer.train()
