"""
Source learners whose learning histories Algorithm Distillation distils.

- :func:`make_a2c_learner`: SB3's ``A2C`` with the seed's A3C settings (the faithful default);
- :func:`make_dqn_learner`: SB3's ``DQN`` with a linear Q over one-hot cells (a table) that starts optimistic, an
  SB3 learner that searches a room it has not seen instead of walking at random, updated online so that each step is
  tabular Q-learning's (AD on its histories: benchmarks/ad/README.md, sixth run);
- :class:`QLearning`: tabular Q-learning with optimistic values, a cheap real learner for tests and
  quick runs (thousands of steps per second, no network);
- :class:`NoisyExpert`: DarkRoom's shortest path taken with probability ``1 - epsilon``, ``epsilon``
  annealed from 1 to 0 (the follow-up work's cheap way to make improving histories).

Any other SB3 algorithm (``PPO``, ``PPO_REWARD``...) is recorded by passing
:class:`~sb3_pref.ad.histories.RecordHistoryCallback` to its ``learn``.
"""

from typing import Any, Optional, cast

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3 import A2C, DQN
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.ad.histories import HistoryRecorder
from sb3_pref.envs.darkroom import DarkRoom


class EmbedExtractor(BaseFeaturesExtractor):
    """One shared ``Linear + ReLU`` embedding for actor and critic (the seed's A3C body), heads on top."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128) -> None:
        super().__init__(observation_space, features_dim)
        n_inputs = int(np.prod(observation_space.shape))
        self.net = th.nn.Sequential(th.nn.Flatten(), th.nn.Linear(n_inputs, features_dim), th.nn.ReLU())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.net(observations)


#: the seed's A3C settings, as SB3 ``A2C`` arguments (10 envs x 10 steps, n-step returns)
A2C_SEED_SETTINGS: dict[str, Any] = dict(
    learning_rate=1e-4,
    n_steps=10,
    gamma=0.99,
    gae_lambda=1.0,  # returns over the whole 10-step rollout, as the seed's "longest n-step" estimate
    ent_coef=0.01,
    vf_coef=0.99,
    max_grad_norm=0.5,
    use_rms_prop=False,
    policy_kwargs=dict(
        features_extractor_class=EmbedExtractor,
        features_extractor_kwargs=dict(features_dim=128),
        net_arch=[],
        optimizer_class=th.optim.Adam,
        optimizer_kwargs=dict(betas=(0.9, 0.999), eps=1e-6),
    ),
)


def make_a2c_learner(env: VecEnv, seed: Optional[int] = None, **overrides: Any) -> A2C:
    """
    SB3 ``A2C`` with :data:`A2C_SEED_SETTINGS` (A2C's RMSprop replaced by Adam, eps 1e-6).

    :param env: the learner's VecEnv (the seed uses 10 envs)
    :param seed: the learner's seed
    :param overrides: any other ``A2C`` argument
    """
    settings = {**A2C_SEED_SETTINGS, **overrides}
    return A2C("MlpPolicy", env, seed=seed, device="cpu", **settings)


class CellsExtractor(BaseFeaturesExtractor):
    """
    The one-hot cell of a DarkRoom observation: ``(x, y)`` scaled to [0, 1] (``observation="xy"``) is turned into
    one of ``size * size`` cells, a one-hot observation passes as it is. A linear layer on it is a table.

    :param observation_space: DarkRoom's observation space
    :param size: the room's side
    """

    def __init__(self, observation_space: gym.spaces.Box, size: int = 9) -> None:
        super().__init__(observation_space, size * size)
        self.size = size
        n_inputs = int(np.prod(observation_space.shape))
        if n_inputs not in (2, size * size):
            raise ValueError(f"CellsExtractor needs (x, y) or {size * size} one-hot cells, got {n_inputs} inputs")
        self.xy = n_inputs == 2

    def forward(self, observations: th.Tensor) -> th.Tensor:
        if not self.xy:
            return observations
        xy = th.round(observations * (self.size - 1)).long()
        return th.nn.functional.one_hot(xy[:, 0] * self.size + xy[:, 1], self.size * self.size).float()


#: :func:`make_dqn_learner`'s settings: online Q-learning inside SB3's DQN. A buffer of one transition and a batch of
#: one make each gradient step learn from the step just taken, and a target network copied at every step makes the
#: target the current table's, so one SGD step moves the value just tried half way to its target, as QLearning does
#: (Huber's gradient is the error while it is under 1, and values here stay in [0, 1]). With replayed batches and a
#: target copied every 100 steps (the fifth run in benchmarks/ad/README.md), a failed action kept its value long enough for
#: the learner to repeat it, and AD copied the repetition.
DQN_TABULAR_SETTINGS: dict[str, Any] = dict(
    learning_rate=0.5,
    buffer_size=1,
    learning_starts=0,
    batch_size=1,
    gamma=0.9,
    train_freq=1,
    gradient_steps=1,
    target_update_interval=1,
    exploration_fraction=0.0,
    exploration_initial_eps=0.05,
    exploration_final_eps=0.05,
)


def make_dqn_learner(
    env: VecEnv, seed: Optional[int] = None, initial_value: float = 1.0, tie_break: float = 0.01, **overrides: Any
) -> DQN:
    """
    SB3 ``DQN`` whose Q is a table (:class:`CellsExtractor` and one linear layer, no bias) with every value starting
    at ``initial_value``. Optimism makes it try actions it has not tried; on the seed's room it finds a new goal and
    learns it about as fast as :class:`QLearning`, where A2C is still at a random walk's level after 200 episodes
    (benchmarks/ad/ad_source_search.py). With :data:`DQN_TABULAR_SETTINGS` each step is QLearning's update.

    :param env: a DarkRoom VecEnv (one env: the history is then one learner's episodes in order)
    :param seed: the learner's seed
    :param initial_value: the optimistic initial value of every action in every cell (the goal is worth 1)
    :param tie_break: each initial value is raised by a uniform draw in ``[0, tie_break)`` (seeded by ``seed``), so
        that untried actions are tried in a random order, not always the first one first
    :param overrides: any other ``DQN`` argument
    """
    size = int(env.get_attr("size")[0])
    settings = {**DQN_TABULAR_SETTINGS, **overrides}
    policy_kwargs = dict(
        features_extractor_class=CellsExtractor,
        features_extractor_kwargs=dict(size=size),
        net_arch=[],
        optimizer_class=th.optim.SGD,
    )
    model = DQN("MlpPolicy", env, seed=seed, device="cpu", policy_kwargs=policy_kwargs, **settings)
    # Optimistic values, each raised by a seeded draw below a step of learning: equal values would make argmax take
    # the first action in every untried cell, so every learner would sweep the room in the same order. QLearning
    # breaks ties at random for the same reason.
    generator = th.Generator().manual_seed(0 if seed is None else int(seed))
    layer = cast(th.nn.Linear, model.q_net.q_net[0])
    layer.weight.data.copy_(initial_value + tie_break * th.rand(layer.weight.shape, generator=generator))
    layer.bias.data.zero_()
    layer.bias.requires_grad_(False)  # a per-action bias would move that action's value in every cell at once
    model.q_net_target.load_state_dict(model.q_net.state_dict())
    return model


class QLearning:
    """
    Tabular Q-learning over the env's observations (each distinct observation is a state), with
    optimistic initial values and epsilon-greedy actions, on a single gymnasium env. Optimism makes
    it search untried actions first, so its histories show search, then a found goal, then exploitation.

    :param env: a single env with a Discrete action space and finitely many observations
    :param learning_rate: step size of the update
    :param gamma: discount
    :param initial_value: optimistic initial Q-value
    :param epsilon: probability of a random action
    :param seed: seed of the learner's generator and of the env
    """

    def __init__(
        self,
        env: gym.Env,
        learning_rate: float = 0.5,
        gamma: float = 0.9,
        initial_value: float = 1.0,
        epsilon: float = 0.05,
        seed: Optional[int] = None,
    ) -> None:
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ValueError(f"QLearning needs a Discrete action space, got {env.action_space}")
        self.env = env
        self.n_actions = int(env.action_space.n)
        self.learning_rate, self.gamma, self.initial_value, self.epsilon = learning_rate, gamma, initial_value, epsilon
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.q: dict[bytes, np.ndarray] = {}

    def _values(self, obs: np.ndarray) -> np.ndarray:
        key = np.asarray(obs, dtype=np.float32).tobytes()
        if key not in self.q:
            self.q[key] = np.full(self.n_actions, self.initial_value)
        return self.q[key]

    def _act(self, values: np.ndarray) -> int:
        if self.rng.random() < self.epsilon:
            return int(self.rng.integers(self.n_actions))
        best = np.flatnonzero(values == values.max())
        return int(best[self.rng.integers(len(best))])  # random tie-break: no fixed sweep order

    def learn(self, total_timesteps: int, recorder: Optional[HistoryRecorder] = None) -> "QLearning":
        """Train for ``total_timesteps`` steps, recording every step into ``recorder``."""
        obs, _ = self.env.reset(seed=self.seed)
        for _ in range(int(total_timesteps)):
            values = self._values(obs)
            action = self._act(values)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            target = float(reward) + (0.0 if terminated else self.gamma * self._values(next_obs).max())
            values[action] += self.learning_rate * (target - values[action])
            if recorder is not None:
                recorder.add(obs[None], np.array([action]), np.array([reward]), np.array([terminated or truncated]))
                if recorder.full:
                    break
            obs = next_obs if not (terminated or truncated) else self.env.reset()[0]
        return self


class NoisyExpert:
    """
    DarkRoom's shortest path to the goal with probability ``1 - epsilon``, a random action otherwise;
    ``epsilon`` falls linearly from 1 to 0 over the first ``anneal_fraction`` of the steps.

    With ``anneal_after_reward``, epsilon stays 1 until the first rewarded step and falls from there:
    like a real learner, the history improves only once it has found the goal, so the improvement a
    model learns to copy in context follows the reward it saw, not a clock (a clock-driven history
    never shows, late in its context, a learner that has not found the goal yet).

    :param env: a single ``DarkRoom`` (possibly wrapped); the expert reads its goal
    :param anneal_fraction: share of the steps over which epsilon reaches 0
    :param anneal_after_reward: start the annealing at the first rewarded step instead of the first step
    :param seed: seed of the generator and of the env
    """

    def __init__(
        self, env: gym.Env, anneal_fraction: float = 0.5, anneal_after_reward: bool = False, seed: Optional[int] = None
    ) -> None:
        if not hasattr(env.unwrapped, "goal"):
            raise ValueError("NoisyExpert needs a DarkRoom env (it reads the goal)")
        self.env = env
        self.anneal_fraction = anneal_fraction
        self.anneal_after_reward = anneal_after_reward
        self.rng = np.random.default_rng(seed)
        self.seed = seed

    def _expert(self) -> int:
        room = cast(DarkRoom, self.env.unwrapped)
        assert room.goal is not None  # set by reset, which learn() calls first
        (x, y), (gx, gy) = room._pos, room.goal
        if x != gx:
            return 3 if gx > x else 2
        if y != gy:
            return 0 if gy > y else 1
        return 4

    def learn(self, total_timesteps: int, recorder: Optional[HistoryRecorder] = None) -> "NoisyExpert":
        """Act for ``total_timesteps`` steps, recording every step into ``recorder``."""
        obs, _ = self.env.reset(seed=self.seed)
        n_actions = int(cast(gym.spaces.Discrete, self.env.action_space).n)
        start: Optional[int] = None if self.anneal_after_reward else 0  # the step at which epsilon starts to fall
        for step in range(int(total_timesteps)):
            since = 0 if start is None else step - start
            epsilon = max(0.0, 1.0 - since / max(self.anneal_fraction * total_timesteps, 1.0))
            action = int(self.rng.integers(n_actions)) if self.rng.random() < epsilon else self._expert()
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            if start is None and float(reward) > 0:
                start = step + 1
            if recorder is not None:
                recorder.add(obs[None], np.array([action]), np.array([reward]), np.array([terminated or truncated]))
                if recorder.full:
                    break
            obs = next_obs if not (terminated or truncated) else self.env.reset()[0]
        return self
