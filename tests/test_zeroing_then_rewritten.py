"""LC104 where the gradients are written back after the zeroing, or only some parameters' are cleared."""

from __future__ import annotations

from loopcheck.engine import check_source

_CRITIC = """
import torch


def update(policy, batches, optimizer, {params}):
    for obs, returns in batches:
        _, values = policy(obs)
        value_loss = torch.nn.functional.mse_loss(values.flatten(), returns)
        optimizer.zero_grad()
        value_loss.backward()
        for param in actor_params:
            param.grad = None
        optimizer.step()
"""


def _codes(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC104"])]


def test_parameters_the_file_lists_itself_are_kept_out_of_the_step() -> None:
    listed = _CRITIC.format(params="shared").replace(
        "    for obs, returns", "    actor_params = [p for p in shared if p.requires_grad]\n    for obs, returns")
    assert _codes(listed) == []


def test_a_list_of_every_parameter_or_one_handed_in_is_the_steps_gradients() -> None:
    every = _CRITIC.format(params="shared").replace(
        "    for obs, returns", "    actor_params = list(policy.parameters())\n    for obs, returns")
    assert _codes(every) == ["LC104"]
    assert _codes(_CRITIC.format(params="actor_params")) == ["LC104"]
