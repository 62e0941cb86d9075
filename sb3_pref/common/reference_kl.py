"""
The reference policy and the KL penalty's measurement: loading a frozen copy of a policy in whatever
form it is given, rebuilding it from its saved class and arguments, evaluating it on whole rollouts
(``log pi_ref`` of the rollout's actions, actions sampled from it) and the adaptive KL coefficient.

Separate from :mod:`sb3_pref.common.rlhf` because this is the policy-facing machinery (SB3 policies,
recurrent hidden states, rollout buffers), while ``rlhf`` holds the reward-side helpers (whitening,
gain/bias), the preset, the option checks and the algorithm mixin that uses all of them. The KL
estimator itself is described in :mod:`sb3_pref.common.rlhf`.
"""

import os
from typing import Any, Optional, Union

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.utils import obs_as_tensor

ReferenceSource = Union[BasePolicy, BaseAlgorithm, str, os.PathLike, None]

# Upper bound on transitions per reference forward pass (bounded memory for big rollouts).
_CHUNK = 8192


def adaptive_kl_coef(coef: float, kl: float, target: float, horizon: int, n_steps: int) -> float:
    """
    The document's adaptive controller, one update.

    :param coef: current coefficient ``beta``
    :param kl: measured KL (mean per env step over the rollout)
    :param target: wanted KL, same unit as ``kl``
    :param horizon: env steps over which a persistent error would move ``beta`` by about ``e^0.2``
    :param n_steps: env steps (summed over envs) the measurement covers
    :return: ``beta * (1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon)``
    """
    error = float(np.clip(kl / target - 1.0, -0.2, 0.2))
    return float(coef * (1.0 + error * n_steps / horizon))


def _is_recurrent(policy: BasePolicy) -> bool:
    return hasattr(policy, "lstm_actor")


def load_reference_policy(source: ReferenceSource, device: Union[str, th.device] = "cpu") -> BasePolicy:
    """
    A frozen copy of a reference policy (eval mode, no gradients), whatever form it is given in.

    :param source: an SB3 policy, an SB3 model (its ``.policy``), or the path of a model saved with
        ``model.save`` (any on-policy algorithm: the policy is rebuilt from the file's class and kwargs)
    :param device: where the copy lives
    """
    if isinstance(source, BaseAlgorithm):
        source = source.policy
    if isinstance(source, BasePolicy):
        # Rebuilt rather than deep-copied: a live policy holds optimizer state and non-leaf tensors.
        policy = rebuild_policy(policy_config(source), device)
        policy.load_state_dict(source.state_dict())
    elif isinstance(source, (str, os.PathLike)):
        data, params, _ = load_from_zip_file(source, device=device)  # type: ignore[arg-type]  # any PathLike opens
        if data is None or "policy" not in params:
            raise ValueError(f"reference_policy={str(source)!r} holds no SB3 policy: pass a file written by model.save()")
        kwargs = dict(data.get("policy_kwargs") or {})
        policy = data["policy_class"](data["observation_space"], data["action_space"], lambda _: 0.0, **kwargs)
        policy.load_state_dict(params["policy"])
    else:
        raise ValueError(
            "reference_policy must be an SB3 policy, an SB3 model, the path of a saved model, or 'initial', "
            f"got {type(source).__name__}"
        )
    if not hasattr(policy, "get_distribution"):
        raise ValueError(
            f"reference_policy of type {type(policy).__name__} has no action distribution: "
            "use an on-policy (actor-critic) policy"
        )
    policy = policy.to(device)
    policy.set_training_mode(False)
    policy.requires_grad_(False)
    return policy


def check_reference_spaces(policy: BasePolicy, observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Raise a clear error when the reference policy was built for other spaces than the algorithm's."""
    for name, theirs, ours in [
        ("observation", policy.observation_space, observation_space),
        ("action", policy.action_space, action_space),
    ]:
        if theirs != ours:
            raise ValueError(
                f"reference_policy has {name} space {theirs}, but this model's env has {ours}: pass a policy "
                "trained on this env, or reference_policy='initial' for a frozen copy of the starting policy"
            )


class ReferenceKL:
    """
    Evaluates a frozen reference policy on whole rollouts: log-probabilities of the rollout's actions,
    and actions drawn from it. A recurrent reference keeps its own hidden state from one rollout to
    the next (the env streams continue), so each rollout is one batched pass per env sequence.

    :param policy: the frozen reference (see :func:`load_reference_policy`)
    """

    def __init__(self, policy: BasePolicy) -> None:
        self.policy = policy
        self.recurrent = _is_recurrent(policy)
        self._states: Optional[tuple[th.Tensor, th.Tensor]] = None

    def reset(self) -> None:
        """Forget the recurrent state (new episodes in every env)."""
        self._states = None

    def _flat(self, array: np.ndarray) -> np.ndarray:
        # Time-major (n_steps, n_envs, ...) to one batch; a recurrent pass wants each env's sequence contiguous.
        if self.recurrent:
            array = array.swapaxes(0, 1)
        return array.reshape(-1, *array.shape[2:])

    def _unflat(self, values: np.ndarray, n_steps: int, n_envs: int) -> np.ndarray:
        if self.recurrent:
            return values.reshape(n_envs, n_steps, *values.shape[1:]).swapaxes(0, 1)
        return values.reshape(n_steps, n_envs, *values.shape[1:])

    def _distributions(self, obs: Union[np.ndarray, dict], episode_starts: np.ndarray, advance: bool = True):
        """
        Yield ``(slice, distribution)`` over a flattened rollout, in chunks (one chunk when recurrent).

        :param obs: the policy's observations ``(n_steps, n_envs, ...)`` (or a dict of them)
        :param episode_starts: ``(n_steps, n_envs)``, used by a recurrent reference
        :param advance: a recurrent reference keeps the hidden state reached at the end (the next
            rollout continues from it); False leaves it at the rollout's start
        """
        policy: Any = self.policy  # a recurrent policy's attributes are not declared on BasePolicy
        n_steps, n_envs = episode_starts.shape
        flat_obs = {key: self._flat(value) for key, value in obs.items()} if isinstance(obs, dict) else self._flat(obs)
        total = n_steps * n_envs
        with th.no_grad():
            if self.recurrent:
                if self._states is None:
                    shape = policy.lstm_hidden_state_shape
                    zeros = th.zeros(shape[0], n_envs, shape[2], device=policy.device)
                    self._states = (zeros, zeros.clone())
                starts = th.as_tensor(self._flat(episode_starts), dtype=th.float32, device=policy.device)
                dist, states = policy.get_distribution(obs_as_tensor(flat_obs, policy.device), self._states, starts)
                if advance:
                    self._states = states
                yield slice(0, total), dist
                return
            for start in range(0, total, _CHUNK):
                part = slice(start, min(start + _CHUNK, total))
                chunk = {key: value[part] for key, value in flat_obs.items()} if isinstance(flat_obs, dict) else flat_obs[part]
                yield part, policy.get_distribution(obs_as_tensor(chunk, policy.device))

    def _action_tensor(self, actions: np.ndarray) -> th.Tensor:
        tensor = th.as_tensor(actions, device=self.policy.device)
        if isinstance(self.policy.action_space, spaces.Discrete):
            return tensor.long().flatten()
        if isinstance(self.policy.action_space, spaces.MultiDiscrete):
            return tensor.long()
        return tensor.float()

    def log_prob(self, buffer: RolloutBuffer) -> np.ndarray:
        """:return: ``log pi_ref(a_t|s_t)`` of the buffer's actions, ``(n_steps, n_envs)``"""
        n_steps, n_envs = buffer.log_probs.shape
        actions = self._flat(buffer.actions)
        out = np.empty(n_steps * n_envs, dtype=np.float32)
        for part, dist in self._distributions(buffer.observations, buffer.episode_starts):
            out[part] = dist.log_prob(self._action_tensor(actions[part])).float().cpu().numpy()
        return self._unflat(out, n_steps, n_envs)

    def kl(self, buffer: RolloutBuffer) -> np.ndarray:
        """:return: per-step ``log pi(a|s) - log pi_ref(a|s)`` of the rollout, ``(n_steps, n_envs)``"""
        return buffer.log_probs.astype(np.float32) - self.log_prob(buffer)

    def sample_actions(self, obs: Union[np.ndarray, dict], episode_starts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """
        Actions drawn from the reference at a rollout's observations, as the env would execute them
        (Box actions clipped, or unscaled for a squashing policy), ``(n_steps, n_envs, *action_shape)``.
        A recurrent reference starts from its current state and does not advance it.

        :param obs: the policy's observations ``(n_steps, n_envs, ...)`` (or a dict of them)
        :param episode_starts: ``(n_steps, n_envs)``
        :param rng: the source of randomness (torch's global generator is left untouched)
        """
        n_steps, n_envs = episode_starts.shape
        parts = []
        # A forked torch RNG seeded from ``rng``: same seed, same samples, and no effect on the policy's sampling.
        with th.random.fork_rng(devices=[]):
            th.manual_seed(int(rng.integers(2**31)))
            for _, dist in self._distributions(obs, episode_starts, advance=False):
                parts.append(dist.get_actions(deterministic=False).cpu().numpy())
        actions = np.concatenate(parts).reshape(n_steps * n_envs, *self.policy.action_space.shape)  # type: ignore[misc]
        space = self.policy.action_space
        if isinstance(space, spaces.Box):
            squash = self.policy.squash_output
            actions = self.policy.unscale_action(actions) if squash else np.clip(actions, space.low, space.high)
        return self._unflat(actions, n_steps, n_envs)


def rebuild_policy(config: dict[str, Any], device: Union[str, th.device]) -> BasePolicy:
    """A frozen policy of the class and constructor arguments in ``config`` (weights come from a state dict)."""
    policy = config["class"](**config["data"])
    policy = policy.to(device)
    policy.set_training_mode(False)
    policy.requires_grad_(False)
    return policy


def policy_config(policy: BasePolicy) -> dict[str, Any]:
    """What :func:`rebuild_policy` needs (saved with the algorithm's data)."""
    data = policy._get_constructor_parameters()
    if _is_recurrent(policy) and "lstm_hidden_size" not in data:
        # sb3-contrib's recurrent policy leaves its recurrent sizes out of its constructor parameters.
        data.update(
            lstm_hidden_size=policy.lstm_output_dim,
            n_lstm_layers=policy.lstm_actor.num_layers,  # type: ignore[union-attr]
            shared_lstm=policy.shared_lstm,
            enable_critic_lstm=policy.enable_critic_lstm,
            lstm_kwargs=policy.lstm_kwargs,
        )
    return {"class": type(policy), "data": data}


__all__ = [
    "ReferenceKL",
    "ReferenceSource",
    "adaptive_kl_coef",
    "check_reference_spaces",
    "load_reference_policy",
    "policy_config",
    "rebuild_policy",
]
