"""LC107's fix for a trainer that clips after the step, run on CPU (session 31).

The trainer keeps the model its caller built the optimizer over (`self.model = model`) and clips after
`self.optimizer.step()`, so the clip (max_norm 1e-3) has no effect. `loopcheck check --fix` moves the
clip before the step; the fixed script's 4 steps then move the parameters by at most 4 * lr * 1e-3.
Commands and output: output.txt.
"""
import torch


class Trainer:
    def __init__(self, model, optimizer, grad_accum_steps):
        self.model = model
        self.optimizer = optimizer
        self.grad_accum_steps = grad_accum_steps

    def train_one_epoch(self, batches):
        for i, (x, y) in enumerate(batches):
            loss = torch.nn.functional.mse_loss(self.model(x), y) / self.grad_accum_steps
            loss.backward()
            if (i + 1) % self.grad_accum_steps == 0:
                self.optimizer.step()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e-3)
                self.optimizer.zero_grad()


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    batches = [(torch.randn(8, 4), torch.randn(8, 1) * 10) for _ in range(8)]
    Trainer(model, optimizer, 2).train_one_epoch(batches)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    print(f"parameter change over 4 steps: {(after - before).norm():.6f} (at most 4 * 0.1 * 1e-3 = 0.0004 if clipped)")


if __name__ == "__main__":
    main()
