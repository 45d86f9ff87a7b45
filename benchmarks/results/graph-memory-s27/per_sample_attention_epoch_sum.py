# A per-sample self-attention loop (NakedAttention's SelfAttentionModel, written again: 196 steps, 1 channel,
# batch 32) trained with `e_train += e / steps` after `e.backward()`: the host memory the kept graph
# nodes hold, against the same loop with `.detach()`.
#   python per_sample_attention_epoch_sum.py keep|detach STEPS
import resource, sys, torch
torch.manual_seed(0)
class SelfAttentionModel(torch.nn.Module):
  def __init__(self, num_steps, num_channels, num_outputs):
    super().__init__()
    self.K = torch.nn.Parameter(torch.rand(num_channels, num_channels)); self.Q = torch.nn.Parameter(torch.rand(num_channels, num_channels)); self.V = torch.nn.Parameter(torch.rand(num_channels, num_channels))
    self.softmax = torch.nn.Softmax(dim=1); self.out = torch.nn.Linear(num_steps*num_channels, num_outputs)
  def forward(self, x):
    b, n, c = x.shape; y = []
    for i in range(b):
      x_i = x[i]; k = x_i @ self.K; q = x_i @ self.Q; v = x_i @ self.V
      y.append(self.softmax(q @ k.T / c**0.5) @ v)
    return self.out(torch.stack(y, 0).reshape(b, n*c))
detach = sys.argv[1] == "detach"; steps = int(sys.argv[2])
model = SelfAttentionModel(196, 1, 10); opt = torch.optim.Adam(model.parameters(), lr=0.01); lossf = torch.nn.CrossEntropyLoss()
e_train = 0.0
x = torch.randn(32, 196, 1); y = torch.randint(0, 10, (32,))
r0 = None
for s in range(steps):
  e = lossf(model(x), y); opt.zero_grad(); e.backward(); opt.step()
  e_train += (e.detach() if detach else e) / steps
  if s == 20: r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(sys.argv[1], steps, "steps: max RSS grew", (r1 - r0) / 1024, "MB after step 20;", (r1 - r0) / (steps - 20), "KB/step")
