"""Objects whose ``step`` advances something other than an optimizer.

A reinforcement-learning environment (``obs, reward, done, info = env.step(action)``), a simulator
or a solver stepped by a time increment (``sim.step(0.01)``): their ``step`` takes what to do and
hands back what happened. An optimizer's ``step`` takes nothing or a closure, and returns None or
the closure's loss. A helper of another module that calls ``env.step(action)`` on an argument is
not a helper that steps the optimizer it is handed.

Read on Python's ``ast`` (the project's facts) and on names (a loop file's call of such a helper).
"""

from __future__ import annotations

import ast

from loopcheck.patterns import Pattern

# `env`, `envs`, `test_env`, `env_eval`, `venv` (a vectorised env), `train_envs`, `env2`, `testEnv`, `envTest`,
# `environment`, `sim`, `simulator`
_NAME = Pattern(r"(?i:(^|_)(v?envs?|environments?|sim|simulator|simulation)\d*($|_))"
                r"|[a-z\d](Env|Envs|Environment|Simulator)$|^v?envs?[A-Z\d]")
_OPTIMIZER = Pattern(r"(?i:optim)|(^|_)opts?($|_|\d)|^opt[A-Z]")
# `gym.make(...)`, `gymnasium.vector.make(...)`, `envpool.make(...)`, `make_env(...)`, `make_vec_env(...)`,
# `SubprocVecEnv(...)`, `SyncVectorEnv(...)`, `AtariEnv(...)`, `VecNormalize(...)`
_CONSTRUCTOR = Pattern(r"^(gym|gymnasium|envpool)(\.vector)?\.make(_vec)?$|(^|\.|_)(make|create|build)_?(vec_?)?envs?$"
                       r"|(^|\.)[A-Z]\w*(Env|VecEnv|VectorEnv)$|(^|\.)Vec[A-Z]\w*$|(^|\.)\w*Environment$")
# What an optimizer's closure is not: a literal, an element, arithmetic, a container (`sim.step(0.01)`,
# `env.step(actions[i])`, `env.step(a * 2 - 1)`)
_NOT_CALLABLE = (ast.Constant, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Tuple,
                 ast.List, ast.Dict, ast.Set, ast.JoinedStr, ast.ListComp)


def environment_name(name: str) -> bool:
    """The last part of ``name`` says an environment or simulator (``self.test_env``, ``envs``)."""
    short = name.rsplit(".", 1)[-1]
    return _NAME.search(short) is not None and _OPTIMIZER.search(short) is None  # not `sim_optimizer`


def environment_constructor(name: str) -> bool:
    """``name`` (a called dotted name) builds an environment (``gym.make``, ``SubprocVecEnv``)."""
    return _CONSTRUCTOR.search(name) is not None


def not_an_optimizer_step(call: ast.Call, receiver: str, unpacked: set[int]) -> bool:
    """``receiver.step(...)`` at ``call`` is not an optimizer's: the receiver is named as an
    environment, the step is handed more than a closure (two arguments, a literal, an element) or
    its result is unpacked or indexed (``unpacked``: ids of such calls)."""
    if environment_name(receiver) or id(call) in unpacked:
        return True
    return len(call.args) > 1 or any(isinstance(a, _NOT_CALLABLE) for a in call.args)


def unpacked_results(nodes: list[ast.AST]) -> set[int]:
    """Ids of the calls among ``nodes`` whose result is unpacked (``obs, r, done, info = env.step(a)``)
    or indexed (``env.step(a)[0]``): never what an optimizer's step returns."""
    found: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            found.add(id(node.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
            found.add(id(node.value))
    return found
