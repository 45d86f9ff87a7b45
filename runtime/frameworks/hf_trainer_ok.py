"""HF Transformers Trainer with gradient_accumulation_steps=4 on a tiny GPT-2 built from a
config (no download): 24 sequences, micro-batch 2, so 3 optimizer steps of 4 micro-batches,
the LR warmed up and decayed once per step by the Trainer's LambdaLR.
framework-expect: steps 3, per-step 4, scheduler LambdaLR 3, lr 0.0 0.001 0.0005"""
from hf_common import train

result = train()
print(f"steps {result.global_step} loss {result.training_loss:.6f}")
