"""A stand-in for the ema_pytorch package (same module and class name, same update()), so the
scenario runs without installing it: loopcheck wraps the class when this module is imported."""
import copy

import torch


class EMA(torch.nn.Module):
    def __init__(self, model, beta=0.99):
        super().__init__()
        self.beta = beta
        self.online_model = [model]
        self.ema_model = copy.deepcopy(model).requires_grad_(False)

    @torch.no_grad()
    def update(self):
        for ema_p, p in zip(self.ema_model.parameters(), self.online_model[0].parameters()):
            ema_p.lerp_(p, 1 - self.beta)
