"""
In-context play, :meth:`AD.predict <sb3_pref.ad.ad.AD.predict>`: the state it carries and the step it takes.

The state is the transitions played so far in the current trial, kept as fixed-size, left-padded arrays
(one row per env), so it is a plain tuple of numpy arrays like an RL2 model's hidden state.

A trial observation ``[obs, one-hot previous action, previous reward, previous done]`` reports the
outcome of the previous action; :func:`extend_context` joins it to the observation that action was
taken in, appends that transition, and builds the window whose last token is the current observation.
:func:`predict_in_context` then runs the frozen transformer on that window and picks the action.

Apart from :mod:`sb3_pref.ad.ad`, whose class trains, saves and loads the model, because playing in context
needs none of that: only the weights, the reward categories and the state above, which lives here too.
"""

from typing import Any, Optional, Protocol

import numpy as np
import torch as th

from sb3_pref.ad.model import ADConfig
from sb3_pref.ad.windows import reward_index

#: (past observations, actions, rewards, time steps, valid slots, last observation, its time step, has-last)
State = tuple[np.ndarray, ...]


def empty_context(n: int, seq_len: int, obs_dim: int) -> State:
    """
    :param n: number of envs
    :param seq_len: transitions per window (the context keeps ``seq_len - 1`` past ones)
    :param obs_dim: observation width
    :return: an empty context
    """
    past = seq_len - 1
    return (
        np.zeros((n, past, obs_dim), np.float32),  # observations of past transitions
        np.zeros((n, past), np.int64),  # their actions
        np.zeros((n, past), np.float32),  # their rewards
        np.zeros((n, past), np.int64),  # their time steps
        np.zeros((n, past), bool),  # which slots hold a transition (left padding is False)
        np.zeros((n, obs_dim), np.float32),  # the observation the last action was taken in
        np.zeros(n, np.int64),  # its time step
        np.zeros(n, bool),  # whether there is a last action
    )


def extend_context(
    trial_obs: np.ndarray, state: State, episode_start: np.ndarray, obs_dim: int, n_actions: int
) -> tuple[State, tuple[np.ndarray, ...]]:
    """
    Append the previous transition to the context and build the model's input window.

    :param trial_obs: ``(n, obs_dim + n_actions + 2)`` trial observations
    :param state: the context so far
    :param episode_start: ``(n,)`` True where a new trial starts (the context is emptied)
    :param obs_dim: observation width
    :param n_actions: number of discrete actions
    :return: the new context (its last observation is the current one) and the window
        ``(observations, actions, rewards, timesteps, valid)`` of ``seq_len`` transitions, the last
        one holding the current observation with a placeholder action and reward
    """
    n, d, k = len(trial_obs), obs_dim, n_actions
    current, prev_action = trial_obs[:, :d], trial_obs[:, d : d + k].argmax(1)
    prev_reward, prev_done = trial_obs[:, d + k], trial_obs[:, d + k + 1] > 0.5
    c_obs, c_act, c_rew, c_ts, c_valid, last_obs, last_ts, has_last = (a.copy() for a in state)
    append = has_last & ~episode_start
    if append.any():
        for array in (c_obs, c_act, c_rew, c_ts, c_valid):
            array[append] = np.roll(array[append], -1, axis=1)
        c_obs[append, -1], c_act[append, -1] = last_obs[append], prev_action[append]
        c_rew[append, -1], c_ts[append, -1], c_valid[append, -1] = prev_reward[append], last_ts[append], True
    # The env's own time step: 0 after an episode end (or at a trial start), else one more than before.
    timestep = np.where(prev_done, 0, last_ts + 1)
    timestep[~append] = 0
    c_valid[episode_start] = False
    window = (
        np.concatenate([c_obs, current[:, None]], 1),
        np.concatenate([c_act, np.zeros((n, 1), np.int64)], 1),
        np.concatenate([c_rew, np.zeros((n, 1), np.float32)], 1),
        np.concatenate([c_ts, timestep[:, None]], 1),
        np.concatenate([c_valid, np.ones((n, 1), bool)], 1),
    )
    new_state = (c_obs, c_act, c_rew, c_ts, c_valid, current.copy(), timestep, np.ones(n, bool))
    return new_state, window


class PlayingAD(Protocol):
    """What in-context play reads of an :class:`~sb3_pref.ad.ad.AD` model (the class is above this module: naming
    it here would close an import circle)."""

    config: ADConfig
    reward_values: list[float]
    device: th.device
    _predict_rng: np.random.Generator

    @property
    def policy(self) -> th.nn.Module: ...

    @property
    def trial_obs_dim(self) -> int: ...

    def _autocast(self) -> Any: ...


def predict_in_context(
    model: PlayingAD,
    observation: np.ndarray,
    state: Optional[State] = None,
    episode_start: Optional[np.ndarray] = None,
    deterministic: bool = False,
) -> tuple[np.ndarray, State]:
    """
    One action per env from the context so far (the body of :meth:`AD.predict <sb3_pref.ad.ad.AD.predict>`).

    :param model: the model that plays, its weights frozen
    :param observation: ``(n_envs, obs_dim + n_actions + 2)`` trial observations
    :param state: the context returned by the previous call (None: empty)
    :param episode_start: ``(n_envs,)`` True where a new trial starts
    :param deterministic: take the most likely action instead of sampling from ``model._predict_rng``
    :return: actions ``(n_envs,)`` and the new context
    """
    obs = np.asarray(observation, dtype=np.float32)
    obs = obs.reshape(1, -1) if obs.ndim == 1 else obs
    if obs.shape[1] != model.trial_obs_dim:
        raise ValueError(
            f"observation must be a trial observation of width {model.trial_obs_dim} (obs, one-hot previous action, "
            f"previous reward, previous done), got width {obs.shape[1]}: play AD in a TrialWrapper env"
        )
    n = len(obs)
    starts = np.zeros(n, bool) if episode_start is None else np.asarray(episode_start, bool).reshape(n)
    context = state if state is not None else empty_context(n, model.config.seq_len, model.config.obs_dim)
    new_state, window = extend_context(obs, context, starts, model.config.obs_dim, model.config.n_actions)
    window = (*window[:2], reward_index(window[2], model.reward_values), *window[3:])
    # Drop the left-padding slots that no env uses: masked keys change nothing for the valid queries, and
    # envs in step (every env of an evaluation batch) then need no padding mask at all, the costly part.
    first = int(np.argmax(window[4].any(0)))
    window = tuple(a[:, first:] for a in window)
    model.policy.eval()
    with th.no_grad(), model._autocast():
        tensors = [th.as_tensor(a, device=model.device) for a in window]
        logits = model.policy(*tensors)[:, -1].float()
    if deterministic:
        actions = logits.argmax(-1).cpu().numpy()
    else:
        probs = th.softmax(logits, -1).cpu().numpy().astype(np.float64)
        actions = (probs.cumsum(1) > model._predict_rng.random((n, 1)) * probs.sum(1, keepdims=True)).argmax(1)
    return actions.astype(np.int64), new_state
