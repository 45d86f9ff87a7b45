"""voxelpose's summed-loss accumulation (lib/core/function.py 33-70) on CPU: which batches' losses
ever reach a backward. Each batch i has a loss w * x_i with x_i = 2**i, so d loss / d w of a step
is the sum of 2**i / 4 over the batches summed into it: its bits name them."""
import torch

w = torch.nn.Parameter(torch.ones(()))  # lr 0: w stays 1, every loss is positive
optimizer = torch.optim.SGD([w], lr=0.0)
loader = [torch.tensor(float(2 ** i)) for i in range(10)]  # len(loader) = 10, 10 % 4 = 2
seen = []
optimizer.register_step_post_hook(lambda opt, a, k: seen.append(int(w.grad.item() * 4)))

for epoch in range(2):
    accumulation_steps = 4
    accu_loss_3d = 0
    for i, x in enumerate(loader):
        loss_3d = w * x
        if accu_loss_3d > 0 and (i + 1) % accumulation_steps == 0:
            optimizer.zero_grad()
            accu_loss_3d.backward()
            optimizer.step()
            accu_loss_3d = 0.0
        else:
            accu_loss_3d += loss_3d / accumulation_steps
    print(f"epoch {epoch}: left unpropagated at the end of the pass: "
          f"{[i for i in range(10) if int(accu_loss_3d.item() * 4) >> i & 1] if torch.is_tensor(accu_loss_3d) else []}")

for n, bits in enumerate(seen):
    print(f"step {n}: batches {[i for i in range(10) if bits >> i & 1]}")
stepped = {i for bits in seen for i in range(10) if bits >> i & 1}
print("batches never back-propagated:", sorted(set(range(10)) - stepped))
