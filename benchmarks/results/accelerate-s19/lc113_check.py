# pseudoESM's loop, reduced: N=4; which micro-batches reach the gradient of the step?
import torch
torch.manual_seed(0)
net = torch.nn.Linear(3, 1, bias=False)
opt = torch.optim.SGD(net.parameters(), lr=0.0)  # lr 0: read the gradient the step sees
xs = [torch.randn(2, 3) for _ in range(4)]
N = 4
for step, x in enumerate(xs):
    loss = net(x).pow(2).mean()
    if N > 1:
        loss /= N
    if (step + 1) % N == 0:
        opt.zero_grad()
        loss.backward()
        seen = net.weight.grad.clone()
        opt.step()
def grad(batches):
    net.zero_grad(); sum(net(x).pow(2).mean() / N for x in batches).backward(); return net.weight.grad.clone()
print("step gradient == last micro-batch / N:", torch.allclose(seen, grad(xs[-1:])),
      "| == mean of the window:", torch.allclose(seen, grad(xs)))
