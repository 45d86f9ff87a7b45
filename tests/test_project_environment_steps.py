"""A helper of another module that calls ``step`` on what it is handed steps an optimizer only when
that step can be an optimizer's: not a gym environment's (``obs, reward, done, info =
env.step(action)``), a simulator's (``sim.step(0.01)``), nor a scheduler's the loop hands it. The
same helpers handed an optimizer that the loop never zeroes still give LC103."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

# Deep-Reinforcement-Learning-Hands-On (Chapter19): the policy is tested in a gym environment every
# few hundred batches, through lib/__init__.py's `test_net(net, test_env)`
TEST_NET = """
    import numpy as np


    def test_net(net, env, count=10):
        rewards = 0.0
        for _ in range(count):
            obs = env.reset()
            while True:
                action = np.clip(net(obs).detach().numpy(), -1, 1)
                obs, reward, done, _ = env.step(action)
                rewards += reward
                if done:
                    break
        return rewards / count


    def rollout(policy, world, steps):
        obs = world.reset()
        for _ in range(steps):
            obs = world.step(policy(obs))[0]


    def advance(sim, dt):
        sim.step(dt)


    def tick(clock):
        clock.step(0.01)


    def denoise(noise_scheduler, model_output, t, sample):
        return noise_scheduler.step(model_output, t, sample).prev_sample


    def adjust(scheduler, metric):
        scheduler.step(metric)


    def step_opt(optimizer):
        optimizer.step()
"""

LOOP = """
    import gym
    import torch
    from lib import adjust, advance, denoise, rollout, test_net, tick

    net = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(net.parameters())
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
    test_env = gym.make("Pendulum-v1")
    for step_idx, batch in enumerate(loader):
        if step_idx % 100 == 0:
            reward = CALL
        opt.zero_grad()
        loss = net(batch).sum()
        loss.backward()
        opt.step()
"""


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


@pytest.mark.parametrize("call", [
    "test_net(net, test_env)",  # the environment's step is unpacked, and named and built as one
    "test_net(net, world)",  # unpacked: an optimizer's step returns None or the closure's loss
    "rollout(net, world, 200)",  # indexed
    "advance(physics, 0.01)",  # the helper's parameter is named as a simulator
    "tick(physics)",  # handed a literal time increment, not a closure
    "adjust(sched, loss.item())",  # the loop's scheduler
    "denoise(sampler, net(batch), 10, batch)",  # a diffusion sampler's step: model output, timestep, sample
])
def test_a_helper_stepping_something_else_is_no_optimizer_step(project: Path, run_cli, call: str) -> None:
    write_project(project, {"lib/__init__.py": TEST_NET, "train.py": LOOP.replace("CALL", call)})
    assert _codes(run_cli, "train.py") == []


@pytest.mark.parametrize("name", ["world", "test_env"])
def test_an_environment_built_by_the_loop_file_is_no_optimizer(project: Path, run_cli, name: str) -> None:
    """`step(...)` on an argument the helper does not unpack, named neutrally there: what the loop
    hands it (named or built as an environment) decides."""
    helper = TEST_NET + """

    def play(policy, thing):
        thing.step(policy)
"""
    loop = LOOP.replace("CALL", f"play(net, {name})").replace('test_env = gym.make("Pendulum-v1")',
                                                             f'{name} = gym.make("Pendulum-v1")')
    loop = loop.replace("import adjust,", "import play, adjust,")
    write_project(project, {"lib/__init__.py": helper, "train.py": loop})
    assert _codes(run_cli, "train.py") == []


def test_the_same_helpers_stepping_an_unzeroed_optimizer_still_flag(project: Path, run_cli) -> None:
    """The true twin: a helper of the same module steps the optimizer it is handed, beside the
    environment test, in a loop that never zeroes: LC103 on the helper's call, and only there."""
    loop = """
        import gym
        import torch
        from lib import step_opt, test_net

        net = torch.nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters())
        test_env = gym.make("Pendulum-v1")
        for step_idx, batch in enumerate(loader):
            if step_idx % 100 == 0:
                reward = test_net(net, test_env)
            loss = net(batch).sum()
            loss.backward()
            step_opt(opt)
    """
    write_project(project, {"lib/__init__.py": TEST_NET, "train.py": loop})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:14:") and " LC103 " in found[0], found
