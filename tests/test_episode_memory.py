"""LC601 on an A3C worker keeping each step's values in a memory object of another module
(philtabor's ICM worker): the memory is read back into the loss that is back-propagated, and the
action the model's forward returns is a NumPy value."""

from __future__ import annotations

from pathlib import Path

from tests.projects import write_project

ACTOR_CRITIC = """
    import torch as T
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributions import Categorical


    class ActorCritic(nn.Module):
        def __init__(self, input_dims, n_actions):
            super().__init__()
            self.input = nn.Linear(input_dims, 64)
            self.pi = nn.Linear(64, n_actions)
            self.v = nn.Linear(64, 1)

        def forward(self, state):
            x = F.relu(self.input(state))
            dist = Categorical(T.softmax(self.pi(x), dim=1))
            action = dist.sample()
            return action.numpy()[0], self.v(x), dist.log_prob(action)

        def calc_loss(self, rewards, values, log_probs):
            values = T.cat(values).squeeze(-1)
            returns = T.tensor(rewards, dtype=T.float).flip(0).cumsum(0).flip(0)
            advantage = returns - values.detach()
            return -(T.cat(log_probs) * advantage).sum() + F.mse_loss(values, returns)
"""

MEMORY = """
    class Memory:
        def __init__(self):
            self.clear_memory()

        def remember(self, state, action, reward, value, log_p):
            self.states.append(state)
            self.actions.append(action)
            self.rewards.append(reward)
            self.values.append(value)
            self.log_probs.append(log_p)

        def clear_memory(self):
            self.states, self.actions, self.rewards, self.values, self.log_probs = [], [], [], [], []

        def sample_memory(self):
            return self.states, self.actions, self.rewards, self.values, self.log_probs
"""

WORKER = """
    import torch as T
    from actor_critic import ActorCritic
    from memory import Memory


    def worker(env, optimizer, max_eps, t_max=20):
        local_agent = ActorCritic(4, 2)
        memory = Memory()
        actions_taken = []
        for episode in range(max_eps):
            obs, done, ep_steps = env.reset(), False, 0
            while not done:
                action, value, log_prob = local_agent(T.tensor([obs], dtype=T.float))
                obs_, reward, done, info = env.step(action)
                ep_steps += 1
                memory.remember(obs, action, reward, value, log_prob)
                actions_taken.append(action)
                obs = obs_
                if ep_steps % t_max == 0 or done:
                    states, actions, rewards, values, log_probs = memory.sample_memory()
                    loss = local_agent.calc_loss(rewards, values, log_probs)
                    optimizer.zero_grad()
                    loss.backward()
                    T.nn.utils.clip_grad_norm_(local_agent.parameters(), 40)
                    optimizer.step()
                    memory.clear_memory()
        return actions_taken
"""


def _codes(run_cli, *paths: str) -> list[str]:
    code, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC601", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


def test_values_kept_in_a_memory_read_back_into_the_loss_are_not_flagged(project: Path, run_cli) -> None:
    write_project(project, {"worker.py": WORKER, "actor_critic.py": ACTOR_CRITIC, "memory.py": MEMORY})
    assert _codes(run_cli, "worker.py") == []


def test_values_kept_in_a_memory_no_backward_reads_are_flagged(project: Path, run_cli) -> None:
    # the memory is never read back nor emptied; the loss comes from the step's own tensors
    kept = WORKER.replace(
        "states, actions, rewards, values, log_probs = memory.sample_memory()\n"
        "                    loss = local_agent.calc_loss(rewards, values, log_probs)",
        "loss = local_agent.calc_loss([reward], [value], [log_prob])")
    kept = kept.replace("                    memory.clear_memory()\n", "")
    assert "sample_memory" not in kept and "clear_memory" not in kept
    write_project(project, {"worker.py": kept, "actor_critic.py": ACTOR_CRITIC, "memory.py": MEMORY})
    found = _codes(run_cli, "worker.py")
    assert len(found) == 1 and found[0].startswith("worker.py:17:") and "`value`" in found[0]


def test_a_numpy_action_the_forward_returns_holds_no_graph(project: Path, run_cli) -> None:
    write_project(project, {"worker.py": WORKER, "actor_critic.py": ACTOR_CRITIC, "memory.py": MEMORY})
    assert _codes(run_cli, "worker.py") == []
    # the same position returning the policy's probabilities: a tensor with its graph, kept every step
    probs = ACTOR_CRITIC.replace("return action.numpy()[0], self.v(x)", "return dist.probs, self.v(x)")
    write_project(project, {"actor_critic.py": probs})
    found = _codes(run_cli, "worker.py")
    assert len(found) == 1 and found[0].startswith("worker.py:18:") and "`action`" in found[0]
