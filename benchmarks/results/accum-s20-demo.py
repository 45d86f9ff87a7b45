import torch, torch.nn as nn
torch.manual_seed(0)
def grad_after(fn):
    m = nn.Linear(4, 1); 
    with torch.no_grad(): m.weight.fill_(0.5); m.bias.zero_()
    fn(m); return m.weight.grad.clone()
xs = [torch.randn(8, 4) for _ in range(4)]; ys = [torch.randn(8, 1) for _ in range(4)]
crit = nn.MSELoss(); N = 4
mean = grad_after(lambda m: crit(m(torch.cat(xs)), torch.cat(ys)).backward())
mult = grad_after(lambda m: [(crit(m(x), y) * N).backward() for x, y in zip(xs, ys)])
print("item2 loss*N window / true mean grad:", (mult.norm() / mean.norm()).item(), "(N^2 =", N * N, ")")
B = torch.cat(xs); Y = torch.cat(ys)
sl = grad_after(lambda m: [crit(m(B[i:i + 8]), Y[i:i + 8]).mean().backward() for i in range(0, 32, 8)])
print("item4 sum of slice means / batch mean grad:", (sl.norm() / mean.norm()).item(), "(ceil(32/8) = 4)")
# item1 (o8): zero_grad every iteration, backward only on the step of the window, divided by running k
def o8(m):
    k = 1
    for i, (x, y) in enumerate(zip(xs, ys)):
        m.zero_grad(); loss = crit(m(x), y) / k
        if (i + 1) % N != 0: k += 1
        else: loss.backward()
g = grad_after(o8); last = grad_after(lambda m: crit(m(xs[-1]), ys[-1]).backward())
print("item1 step grad / last micro-batch grad:", (g.norm() / last.norm()).item(), "(1/k with k = 4)")
