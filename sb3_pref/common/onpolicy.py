"""
The on-policy side of the glue between the preference core and SB3.
:class:`~sb3_pref.common.algorithm.PreferenceAlgorithmMixin` (:mod:`sb3_pref.common.algorithm`) is what every
preference-learning algorithm shares; it holds a :class:`~sb3_pref.common.controller.PreferenceController`
(``preference``) and the :class:`~sb3_pref.common.controller.RewardWriter` its family makes.

:class:`PreferenceRewardMixin` is the on-policy family (PPO, A2C, RecurrentPPO), whose writer is a
:class:`~sb3_pref.common.rollout_writer.RolloutRewardWriter`: the :class:`RolloutRecorder` (always the first
callback) copies each step's raw transition; when the rollout is complete, before any other callback sees it, the
controller feeds the learner, runs a query round when one is due, and the writer puts the predicted rewards (after
RLHF's KL penalty) into the rollout buffer with :func:`relabel_rollout`. The off-policy family (``SAC_REWARD``) is
:class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin`, on :class:`PreferenceAlgorithmMixin` alone.
"""

import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from sb3_pref.common.algorithm import PreferenceAlgorithmMixin, _old_name
from sb3_pref.common.controller import PHASE_PREFERENCE, PHASE_PRETRAIN, PHASE_TRUE_REWARD
from sb3_pref.common.options import ON_POLICY, document_options, takes_options
from sb3_pref.common.rollout import RolloutRecorder, relabel_rollout
from sb3_pref.common.rollout_writer import RolloutRewardWriter
from sb3_pref.core.checks import user_stacklevel

if TYPE_CHECKING:
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm as _OnPolicyBase
else:
    _OnPolicyBase = object


@document_options(ON_POLICY)
class PreferenceRewardMixin(PreferenceAlgorithmMixin, _OnPolicyBase):
    """
    Preference-based reward learning for an SB3 on-policy algorithm (``class X(PreferenceRewardMixin, PPO)``).

    Its constructor takes the preference options of :mod:`sb3_pref.common.options` by keyword (the algorithm's
    own arguments pass through ``args`` and ``kwargs``), checks them all before anything is changed, and stores
    each under its name.

    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    """

    #: most observations the state-entropy buffer keeps (B-Pref keeps ``unsuper_step``, which is
    #: unbounded); rows of ``obs_dim`` float32, so 100k rows of 24 floats take 9.6 MB
    entropy_capacity: int = 100_000

    unsuper_n_epochs: Optional[int]
    n_epochs: int  # the algorithm's, where it has epochs (PPO, RecurrentPPO; not A2C)
    normalize_reward_samples: str
    kl_coef: float
    kl_target: Optional[float]
    kl_horizon: int
    whiten_reward: bool
    zero_value_head: bool

    _reward_writer: RolloutRewardWriter

    @takes_options(ON_POLICY)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    def _make_reward_writer(self, kwargs: dict[str, Any]) -> RolloutRewardWriter:
        # Only stored here; PreferenceAlgorithmMixin.__init__ checks the value before the algorithm is built.
        return RolloutRewardWriter(self, kwargs.get("reference_policy"))

    def _setup_policy_schedule(self) -> None:
        super()._setup_policy_schedule()
        self._reward_writer.setup()

    def _normalization_sampler(self) -> Optional[Callable[[], np.ndarray]]:
        return self._reward_writer.reference_features if self.normalize_reward_samples == "reference" else None

    def _rollout_steps(self) -> int:
        return int(self.n_steps) * int(self.n_envs)

    def _setup_learn(
        self, total_timesteps: int, callback: Any = None, reset_num_timesteps: bool = True, *args: Any, **kwargs: Any
    ) -> Any:
        envs_reset = reset_num_timesteps or self._last_obs is None
        self._warn_if_env_reward_normalized()
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, *args, **kwargs)
        self._reward_writer.setup_learn(envs_reset)
        return result

    def _warn_if_env_reward_normalized(self) -> None:
        # SB3's VecNormalize default rescales the env's reward, which the policy does not train on once the learned
        # reward replaces it: the setting would do nothing, silently. (SAC_REWARD refuses it: its replay buffer
        # would rescale the learned reward by the true reward's statistics.)
        vec_normalize = self.get_vec_normalize_env()
        if self.reward_model is None or vec_normalize is None or not vec_normalize.norm_reward or self.unsuper_flag == 2:
            return
        warnings.warn(
            f"VecNormalize(norm_reward=True) rescales the env's reward, which {type(self).__name__} does not train on: "
            "the policy trains on the learned reward as the reward model gives it. Wrap the env with "
            f"VecNormalize(..., norm_reward=False), and pass {type(self).__name__}(..., normalize_reward=True) to "
            "rescale the learned reward instead",
            stacklevel=user_stacklevel(),
        )

    def _finish_rollout(self, *args: Any, **kwargs: Any) -> None:
        super()._finish_rollout(*args, **kwargs)
        # RLHF's adaptive KL controller: the writer computed the next rollout's coefficient; the algorithm keeps it.
        if self._reward_writer.next_kl_coef is not None:
            self.kl_coef, self._reward_writer.next_kl_coef = self._reward_writer.next_kl_coef, None

    # ---------------------------------------------------------------- training
    def train(self) -> None:
        """The algorithm's update, with ``unsuper_n_epochs`` epochs while pretraining."""
        # Algorithms without epochs (A2C: one gradient step per rollout) train with their usual update.
        if self.preference.rollout_phase != PHASE_PRETRAIN or not hasattr(self, "n_epochs") or self.unsuper_n_epochs is None:
            return super().train()
        # B-Pref trains the policy harder on the intrinsic reward.
        n_epochs: int = self.n_epochs
        self.n_epochs = self.unsuper_n_epochs
        try:
            return super().train()
        finally:
            self.n_epochs = n_epochs

    # ------------------------------------------------------------------ save / load, and RLHF's state
    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        if self.reference_policy is not None:
            state_dicts = [*state_dicts, "reference_policy"]
        return state_dicts, variables

    @property
    def reference_policy(self) -> Optional[BasePolicy]:
        """The frozen policy of RLHF's KL penalty (None without one; ``"initial"``: set when ``learn`` starts)."""
        return self._reward_writer.reference_policy

    # Read-only, under the names RLHF's values had as the algorithm's attributes.
    reference_source = _old_name("_reward_writer", "reference_source")
    _reference_kl = _old_name("_reward_writer", "reference_kl")
    _rollout_stash = _old_name("_reward_writer", "rollout_stash")

    def _reference_features(self) -> np.ndarray:
        return self._reward_writer.reference_features()


__all__ = [
    "PHASE_PREFERENCE",
    "PHASE_PRETRAIN",
    "PHASE_TRUE_REWARD",
    "PreferenceAlgorithmMixin",
    "PreferenceRewardMixin",
    "RolloutRecorder",
    "relabel_rollout",
]
