"""LC105 through a loss-scaler helper of another module (ConvNeXt-V2's engine_finetune.py and
utils.py): 10 batches per epoch under update_freq 4, so the last 2 micro-batches of each epoch
are never stepped and the next epoch's zero_grad() wipes them. The step runs in utils.py; the
step condition is the loop's update_grad= argument, where the finding belongs."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils import NativeScalerWithGradNormCount


def train_one_epoch(model, criterion, data_loader, optimizer, loss_scaler, update_freq):
    optimizer.zero_grad()  # expect: LC101 (the unstepped tail it wipes)
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        loss = criterion(model(samples), targets) / update_freq
        loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters(),  # expect: LC105
                    update_grad=(data_iter_step + 1) % update_freq == 0)
        if (data_iter_step + 1) % update_freq == 0:
            optimizer.zero_grad()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(torch.randn(40, 16), torch.randint(0, 4, (40,))), batch_size=4)
loss_scaler = NativeScalerWithGradNormCount()
for epoch in range(3):
    train_one_epoch(model, nn.CrossEntropyLoss(), loader, optimizer, loss_scaler, update_freq=4)
