"""
The in-context state of :meth:`AD.predict <sb3_pref.ad.ad.AD.predict>`: the transitions played so
far in the current trial, kept as fixed-size, left-padded arrays (one row per env), so the state
is a plain tuple of numpy arrays like an RL2 model's hidden state.

A trial observation ``[obs, one-hot previous action, previous reward, previous done]`` reports the
outcome of the previous action; :func:`extend_context` joins it to the observation that action was
taken in, appends that transition, and builds the window whose last token is the current observation.
"""

import numpy as np

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
