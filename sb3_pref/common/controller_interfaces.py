"""
The two interfaces the :class:`~sb3_pref.common.controller.PreferenceController` works through:
:class:`PreferenceHost`, what it uses of the SB3 algorithm it runs in, and :class:`RewardWriter`, where a buffer kind
puts a finished rollout's rewards (:class:`~sb3_pref.common.rollout_writer.RolloutRewardWriter` for a rollout buffer,
:class:`~sb3_pref.common.offpolicy.ReplayRewardWriter` for a replay buffer).

They are apart from the controller because they are contracts between three parties: the controller calls them, the
algorithm mixins and the writers implement them. A writer reads this module to learn what it owes, without the
controller's phases and counters; :mod:`sb3_pref.common.controller` re-exports both names.
"""

from typing import Any, Protocol

import numpy as np
from stable_baselines3.common.logger import Logger

from sb3_pref.core.entropy import StateEntropyReward


class PreferenceHost(Protocol):
    """What the controller uses of the SB3 algorithm it runs in: SB3's members and the stored preference options."""

    policy: Any  # SB3's policy: state_dict / load_state_dict, its optimizer and device
    num_timesteps: int
    unsuper_flag: int
    unsuper_reset_policy: bool
    entropy_k: int
    verbose: int

    @property
    def logger(self) -> Logger: ...


class RewardWriter(Protocol):
    """
    Where a buffer kind puts a finished rollout's rewards: the controller decides when, the writer knows the buffer.
    Each writer also keeps a few plain values in SB3's data file (:meth:`saved_values`), under the names the
    algorithm attributes had before the glue was composed, so that files keep their format.
    """

    @property
    def seed_steps(self) -> int:
        """Env steps at the start of a run that belong to no phase of their own: SAC's ``learning_starts`` seed
        steps (pretraining covers them too, when there is one); 0 for a rollout buffer."""
        ...

    def entropy_capacity(self, n_transitions: int, unsuper_step: int) -> int:
        """
        How many observations the k-NN set of pretraining keeps (at least one rollout's ``n_transitions``).

        :param n_transitions: the transitions of one rollout
        :param unsuper_step: the env steps of pretraining in force
        """
        ...

    def rollout_complete(self, obs: np.ndarray) -> None:
        """A rollout is complete, before anything else uses it. :param obs: ``(T, n_envs, obs_dim)`` encoded observations"""
        ...

    def pretrain_rollout(self, entropy: StateEntropyReward, obs: np.ndarray, seen: np.ndarray) -> None:
        """
        A pretraining rollout is complete: give its transitions their state-entropy reward.

        :param entropy: the k-NN set of the pretraining states so far
        :param obs: ``(T, n_envs, obs_dim)`` encoded raw observations the actions were taken in
        :param seen: ``(T, n_envs)`` rewards the env returned to the algorithm
        """
        ...

    def write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        """
        A preference-phase rollout is complete: the algorithm trains on ``predicted`` from now on.

        :param predicted: ``(T, n_envs)`` the reward model's rewards of the rollout's transitions
        :param seen: ``(T, n_envs)`` rewards the env returned to the algorithm
        """
        ...

    def reset_value_head(self) -> None:
        """Pretraining has ended: forget the values the state-entropy reward taught."""
        ...

    def saved_values(self) -> dict[str, Any]:
        """Plain values saved in SB3's data file, by name."""
        ...

    def load_saved_values(self, values: dict[str, Any]) -> None:
        """:param values: what :meth:`saved_values` returned at save time (names missing from old files are left out)"""
        ...


__all__ = ["PreferenceHost", "RewardWriter"]
