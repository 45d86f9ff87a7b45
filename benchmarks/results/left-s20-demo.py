# Run the repo's AccumulativeScaler on CPU (its GradScaler is disabled without CUDA: plain step) in the
# train_one_epoch_4 order; count optimizer steps and EMA updates (the engine's model_ema.update per iteration).
import sys, warnings; warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])  # an extracted ytongbai/ViTs-vs-CNNs@99bd87d (its scaler.py)
import torch, scaler
model = torch.nn.Linear(4, 1); opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0; orig = opt.step
def counted(*a, **k):
    global steps; steps += 1; return orig(*a, **k)
opt.step = counted
ls = scaler.AccumulativeScaler(forward_time=4)
ema_updates = 0
for ii in range(16):
    loss = model(torch.randn(8, 4)).pow(2).mean() / 4
    ls.set_iters(ii); ls(loss, opt, clip_grad=None, parameters=model.parameters())
    if (ii + 1) % 4 == 0: opt.zero_grad()
    ema_updates += 1  # model_ema.update(model), on by default
print("iterations 16, optimizer steps", steps, "EMA updates", ema_updates)
