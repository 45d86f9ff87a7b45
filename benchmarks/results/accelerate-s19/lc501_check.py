# `python lc501_check.py`: one process; what does accelerator.prepare make of the model?
import torch
from accelerate import Accelerator
acc = Accelerator(cpu=True)
model = acc.prepare(torch.nn.Linear(4, 2))
print("distributed_type", acc.distributed_type, "num_processes", acc.num_processes, "model", type(model).__name__)
