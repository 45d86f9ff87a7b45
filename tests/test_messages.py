"""What findings say about real code: the message must describe what happens there."""

from __future__ import annotations

import pytest

from loopcheck.engine import check_source

LOADER_RESTARTED = """
import torch

loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4)
for step in range(1000):
    x, y = next(iter(loader))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_lc604_names_the_restart_cost_not_a_first_batch() -> None:
    (finding,) = check_source(LOADER_RESTARTED, select=["LC604"])
    # a shuffling loader yields a random batch each time: the cost is the restart, not a repeated batch
    assert "worker processes" in finding.message and "new permutation" in finding.message
    assert "yields its first batch" not in finding.message


GRADS_SET_TO_NONE_BEFORE_STEP = """
import torch

for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.grad = None
    optimizer.step()
"""


def test_lc104_names_the_zeroing_as_written() -> None:
    (finding,) = check_source(GRADS_SET_TO_NONE_BEFORE_STEP, select=["LC104"])
    # the loop sets the gradients to None: there is no `p.zero_grad()` call to point at
    assert finding.message.startswith("`p.grad = None` clears the gradients after backward")


APEX_DDP_ACCUMULATING = """
import torch
from apex.parallel import DistributedDataParallel as DDP

model = DDP(model)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
    loss.backward()
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
"""


def test_lc501_on_apex_ddp_advises_its_own_switch() -> None:
    (finding,) = check_source(APEX_DDP_ACCUMULATING, select=["LC501"])
    # apex's DDP has no no_sync(): the advice must be the switch it does have
    assert "disable_allreduce()" in finding.message and "apex's DistributedDataParallel" in finding.message
    (torch_ddp,) = check_source(APEX_DDP_ACCUMULATING.replace("from apex.parallel", "from torch.nn.parallel"),
                                select=["LC501"])
    assert "disable_allreduce" not in torch_ddp.message and "no_sync()" in torch_ddp.message


APEX_OR_TORCH_DDP_BY_FLAG = """
import apex
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, params):
        self.params = params
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if params.multi_gpu and params.amp == -1:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[params.local_rank])
        if params.amp >= 0 and params.multi_gpu:
            model = apex.parallel.DistributedDataParallel(model, delay_allreduce=True)
        self.model = model
        self.n_iter = 0

    def optimize(self, loss):
        params = self.params
        if params.amp == -1:
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        else:
            loss.backward()
            if self.n_iter % params.accumulate_gradients == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()

    def iter(self):
        self.n_iter += 1
"""


def test_lc501_names_the_wrap_of_the_accumulating_branch() -> None:
    # accumulation runs only where amp is on, and there the model is in apex's DDP (XLM's trainer)
    (finding,) = check_source(APEX_OR_TORCH_DDP_BY_FLAG, select=["LC501"])
    assert "apex's DistributedDataParallel" in finding.message and "disable_allreduce()" in finding.message
    # the torch wrap on the accumulating branch: torch's advice
    swapped = APEX_OR_TORCH_DDP_BY_FLAG.replace("params.amp == -1:\n            model", "params.amp >= 0:\n            model") \
        .replace("if params.amp >= 0 and params.multi_gpu:", "if params.amp == -1 and params.multi_gpu:")
    (torch_ddp,) = check_source(swapped, select=["LC501"])
    assert "disable_allreduce" not in torch_ddp.message and "no_sync()" in torch_ddp.message


COUNTER_WITHOUT_INDEX = """
import torch
from tqdm import tqdm

for epoch in range(3):
    step = 0
    for batch in tqdm(loader):
        loss = model(batch) / args.gradient_accumulation_steps
        loss.backward()
        step += 1
        if step % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("source", "advice"), [
    (COUNTER_WITHOUT_INDEX, "`or step == len(loader)`"),
    # counted after the test: the counter is one behind at the test
    (COUNTER_WITHOUT_INDEX.replace("        step += 1\n", "").replace("if step %", "if (step + 1) %")
     .replace("optimizer.zero_grad()\n", "optimizer.zero_grad()\n        step += 1\n"), "`or (step + 1) == len(loader)`"),
])
def test_lc105_advice_uses_the_counter_of_a_loop_without_an_index(source: str, advice: str) -> None:
    (finding,) = check_source(source, select=["LC105"])
    assert advice in finding.message and "(i + 1)" not in finding.message


LOGGED_LOADER = """
import torch

def train_one_epoch(model, data_loader, optimizer, metric_logger, accum_iter):
    optimizer.zero_grad()
    for data_iter_step, (x, y) in enumerate(metric_logger.log_every(data_loader, 20, "Epoch")):
        loss = torch.nn.functional.cross_entropy(model(x), y) / accum_iter
        loss.backward()
        if (data_iter_step + 1) % accum_iter == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


def test_lc105_advice_names_the_loader_a_metric_logger_wraps() -> None:
    (finding,) = check_source(LOGGED_LOADER, select=["LC105"])
    assert "`or (data_iter_step + 1) == len(data_loader)`" in finding.message


COUNT_STANDS_STILL_ON_THE_STEP = """
import torch

count = 0
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if count == accum:
        count = 0
        optimizer.step()
        optimizer.zero_grad()
    else:
        count += 1
"""


def test_a_window_one_micro_batch_long_is_named_n_plus_one() -> None:
    # the count stands still on the stepping micro-batch: N + 1 losses make each window
    by_code = {f.code: f for f in check_source(COUNT_STANDS_STILL_ON_THE_STEP, select=["LC102", "LC106"])}
    assert "every window sums N + 1 micro-batches" in by_code["LC106"].message
    assert "(`accum` + 1) times" in by_code["LC102"].message
    assert by_code["LC102"].fix_message is None  # dividing by N would leave the window N + 1 long


GLOBAL_STEP = """
import torch

global_step = 0
for epoch in range(epochs):
    optimizer.zero_grad()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y) / accum
        loss.backward()
        if global_step % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        global_step += 1
"""


def test_lc106_on_a_count_across_epochs_names_the_window_the_epoch_zeroing_opens() -> None:
    (finding,) = check_source(GLOBAL_STEP, select=["LC106"])
    assert "`global_step` runs on across epochs, so where an epoch starts on a multiple of `accum`" in finding.message
    assert "that epoch's first step one micro-batch of gradients" in finding.message
    per_epoch = GLOBAL_STEP.replace("global_step = 0\n", "").replace("    for x, y in loader:",
                                                                    "    global_step = 0\n    for x, y in loader:")
    (finding,) = check_source(per_epoch, select=["LC106"])
    assert "every later step is shifted" in finding.message
