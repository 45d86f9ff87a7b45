"""A training loop whose result nothing observes (a timing benchmark of a throw-away layer) gets no
LC103; any way the training could be seen keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source

TIMING = (Path(__file__).parent / "fixtures" / "must_not_flag" / "timing_loop_throwaway_layer.py").read_text()
STEP = "        optimizer.step()\n\n    elapsed"


def _codes(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC103"])]


def test_timing_loop_of_a_throwaway_layer_is_silent() -> None:
    assert _codes(TIMING) == []


@pytest.mark.parametrize(("old", "new"), [
    # the loss or the outputs read: the summed gradients show in what is printed or kept
    (STEP, "        optimizer.step()\n        print(loss.item())\n\n    elapsed"),
    (STEP, "        optimizer.step()\n        print(result.mean())\n\n    elapsed"),
    (STEP, "        optimizer.step()\n        losses = loss\n\n    elapsed"),
    # the layer or its optimizer read after the loop, or handed out
    ("    return elapsed", "    return layer"),
    ("    return elapsed", "    torch.save(layer.state_dict(), 'layer.pt')\n    return elapsed"),
    ("    return elapsed", "    return elapsed, optimizer"),
    ("    layer = nn.Sequential(", "    global layer\n    layer = nn.Sequential("),
    # not built here: the caller keeps it (also taken from elsewhere where it trains on data)
    ("def time_layer(d_model", "def time_layer(layer, d_model"),
    ("    layer = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, d_model))\n",
     "    layer = model\n    hidden_state = next(iter(loader))\n"),
    # a second name for the layer, a closure over it
    ("    hidden_state = torch.ones", "    kept = layer\n    hidden_state = torch.ones"),
    ("    hidden_state = torch.ones", "    forward = lambda x: layer(x)\n    hidden_state = torch.ones"),
])
def test_any_way_to_observe_the_training_keeps_the_finding(old: str, new: str) -> None:
    source = TIMING.replace(old, new)
    assert source != TIMING
    assert _codes(source) == ["LC103"]


MEMORY = (Path(__file__).parent / "fixtures" / "must_not_flag"
          / "memory_benchmark_two_steps_of_a_throwaway_model.py").read_text()
MEMORY_STEP = "            optimizer.step()\n\n        max_memory = 0"


def test_memory_benchmark_of_a_throwaway_model_is_silent() -> None:
    assert _codes(MEMORY) == []


@pytest.mark.parametrize(("old", "new"), [
    # the trained model read after the steps, in the try's body, its `finally:` or after the try
    ('        click.echo(f"Peak Activation', '        click.echo(f"{model.balance}")\n        click.echo(f"Peak Activation'),
    ("    finally:\n", "    finally:\n        torch.save(model.state_dict(), 'unet.pt')\n"),
    ('\n\nif __name__', "\n    return model\n\n\nif __name__"),
    # a figure of the training taken inside the loop, or a number of the trained model after it
    (MEMORY_STEP, "            optimizer.step()\n            click.echo(f\"{loss.item()}\")\n\n        max_memory = 0"),
    (MEMORY_STEP, "            optimizer.step()\n        weight_norm = sum(p.norm() for p in model.parameters())\n"
                  "        click.echo(f\"{weight_norm}\")\n\n        max_memory = 0"),
    # what is read before the loop keeps a reference: a list of the parameters, a helper handed them
    ("    param_scale = 2", "    params = list(model.parameters())\n    param_scale = 2"),
    ("    param_count = sum(p.storage().size() for p in model.parameters())",
     "    param_count = sum(register(p) for p in model.parameters())"),
    # the steps in a branch or another loop: not run once at this place
    ("        for _ in range(2):\n", "        if experiment:\n          for _ in range(2):\n"),
])
def test_any_way_to_observe_the_memory_benchmarks_training_keeps_the_finding(old: str, new: str) -> None:
    source = MEMORY.replace(old, new)
    assert source != MEMORY
    assert _codes(source) == ["LC103"]


THROUGHPUT = (Path(__file__).parent / "fixtures" / "must_not_flag" / "throughput_test_of_a_module_on_made_up_input.py").read_text()


def test_throughput_test_of_a_module_on_made_up_input_is_silent() -> None:
    assert _codes(THROUGHPUT) == []


@pytest.mark.parametrize(("old", "new"), [
    # fed data, or a tensor handed in: the module taken from the object trains on it
    ("    x = torch.ones([batch_size, 1, 128, 998])\n", "    x = next(iter(loader))\n"),
    ("def model_speed_test(batch_size=12, test_length=100):\n    x = torch.ones([batch_size, 1, 128, 998])\n",
     "def model_speed_test(x, batch_size=12, test_length=100):\n"),
    # what the steps did read: the loss printed, the network saved after the rounds
    ('    print("warmup done:"', '    print(loss.item())\n    print("warmup done:"'),
    ('    print("average speed: "', '    torch.save(net.state_dict(), "net.pt")\n    print("average speed: "'),
])
def test_any_way_the_throughput_tests_training_shows_keeps_the_finding(old: str, new: str) -> None:
    source = THROUGHPUT.replace(old, new)
    assert source != THROUGHPUT
    assert "LC103" in _codes(source)
