"""
What happens in each rollout of a preference-learning SB3 algorithm, on-policy or off-policy: the phase it
belongs to (state-entropy pretraining, learning from preferences, or the env's own reward), the query rounds,
and when the learned rewards are written into the algorithm's buffer.

The constructor arguments and the set-up are in :class:`~sb3_pref.common.sb3_glue.PreferenceAlgorithmMixin`,
which inherits this mixin; the per-step recording is in :mod:`sb3_pref.common.rollout`. Where the rewards of a
rollout go is the buffer's business: the three hooks at the end of this class are implemented by the on-policy
side (:class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`) and the off-policy side
(:class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin`).
"""

import sys
import warnings
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback
from stable_baselines3.common.type_aliases import MaybeCallback

from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner
from sb3_pref.common.preprocessing import FeatureEncoder
from sb3_pref.common.rollout import (
    PHASE_PREFERENCE,
    PHASE_PRETRAIN,
    PHASE_TRUE_REWARD,
    RolloutRecorder,
)

#: ``learn`` warns when pretraining would take more than this share of the steps it is asked for.
PRETRAIN_WARN_SHARE = 0.25


def _user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside sb3_pref (subclasses add ``learn`` frames)."""
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("sb3_pref"):
        frame, level = frame.f_back, level + 1
    return level


if TYPE_CHECKING:
    # For type checkers only, as in persistence.py: at run time the base is object and the MRO is unchanged.
    from stable_baselines3.common.base_class import BaseAlgorithm

    class _Base(BaseAlgorithm):
        """SB3's base algorithm, whose ``learn`` and ``_setup_model`` the algorithm these mixins run in implements."""

        def learn(self, *args: Any, **kwargs: Any) -> Any: ...

        def _setup_model(self) -> None: ...

else:
    _Base = object


class PreferencePhasesMixin(_Base):
    """The phases of :class:`~sb3_pref.common.sb3_glue.PreferenceAlgorithmMixin`, for either buffer kind."""

    pref_learner: Optional[PreferenceLearner]
    entropy_reward: Optional[StateEntropyReward]
    entropy_k: int
    unsuper_flag: int
    unsuper_step: int
    unsuper_reset_policy: bool
    _policy_before_pretraining: Optional[dict[str, th.Tensor]]
    num_interaction: int
    _pref_encoder: Optional[FeatureEncoder]
    _pretrain_done: bool
    _unsuper_steps_done: int
    _num_interactions: int
    _rollout_phase: int
    _ensure_encoder: Callable[[], None]  # PreferenceRewardMixin's

    # ------------------------------------------------------------------ learn
    def learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: Optional[str] = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        unsuper_flag: Optional[int] = None,
    ):
        """
        SB3's ``learn`` plus B-Pref's ``unsuper_flag`` (see the class docstring; None keeps the constructor's).
        """
        if unsuper_flag is not None:
            if unsuper_flag not in (0, 1, 2):
                raise ValueError(f"unsuper_flag must be 0 (no pretraining), 1 or 2, got {unsuper_flag!r}")
            self.unsuper_flag = unsuper_flag
            self._ensure_encoder()
        self._warn_if_pretraining_dominates(total_timesteps)
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name or type(self).__name__,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    def _warn_if_pretraining_dominates(self, total_timesteps: int) -> None:
        """Tell the user when state-entropy pretraining would take a large share of this ``learn`` call."""
        if self.unsuper_flag not in (1, 2) or self._pretrain_done:
            return
        left = self.unsuper_step - self._unsuper_steps_done
        if left > PRETRAIN_WARN_SHARE * total_timesteps:
            warnings.warn(
                f"state-entropy pretraining takes {left} of this run's {total_timesteps} env steps "
                f"({left / total_timesteps:.0%}): the policy learns nothing about the task meanwhile, and its "
                "pretrained behaviour must be unlearned afterwards. Lower unsuper_step (e.g. "
                f"unsuper_step={int(0.1 * total_timesteps)}) or skip pretraining with learn(..., unsuper_flag=0)",
                stacklevel=_user_stacklevel(),
            )

    def _init_callback(self, callback: MaybeCallback, progress_bar: bool = False) -> BaseCallback:
        if isinstance(callback, list):
            callback = CallbackList(callback)
        if callback is not None and not isinstance(callback, BaseCallback):
            callback = ConvertCallback(callback)
        # The recorder goes first so that user callbacks see the relabelled rollout.
        recorder = [RolloutRecorder()] if self._pref_encoder is not None else []
        callbacks = recorder + ([callback] if callback is not None else [])
        return super()._init_callback(CallbackList(callbacks), progress_bar)

    # ------------------------------------------------------------------ phases
    def _pretraining(self) -> bool:
        return self.unsuper_flag in (1, 2) and not self._pretrain_done and self._unsuper_steps_done < self.unsuper_step

    def _begin_rollout(self) -> None:
        if self._pretraining():
            if self.unsuper_reset_policy and self._unsuper_steps_done == 0:
                # A copy, not a reference: the state dict's tensors are the live parameters.
                self._policy_before_pretraining = {
                    name: tensor.detach().clone() for name, tensor in self.policy.state_dict().items()
                }
            self._rollout_phase = PHASE_PRETRAIN
            return
        if self.unsuper_flag in (1, 2) and not self._pretrain_done:
            self._end_pretraining()
        use_preferences = self.pref_learner is not None and self.unsuper_flag != 2
        self._rollout_phase = PHASE_PREFERENCE if use_preferences else PHASE_TRUE_REWARD

    def _end_pretraining(self) -> None:
        self._pretrain_done = True
        self.entropy_reward = None
        if self.unsuper_flag == 1 and self.pref_learner is not None and len(self.pref_learner.store) > 0:
            self._log_round(self.pref_learner.query_round("uniform"))
        self._num_interactions = 0
        if self._policy_before_pretraining is not None:
            # The value head comes back untrained as well, so no reset is needed after this.
            self.policy.load_state_dict(self._policy_before_pretraining)
            self.policy.optimizer.state.clear()
            self._policy_before_pretraining = None
        else:
            self._reset_value_head()

    def _segment_info_keys(self) -> tuple[str, ...]:
        """``info`` keys recorded with every transition: what the teacher needs to show a segment."""
        teacher = self.pref_learner.teacher if self.pref_learner is not None else None
        return tuple(getattr(teacher, "required_info_keys", ()))

    def _finish_rollout(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        true: np.ndarray,
        seen: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        n_transitions = true.size
        learner = self.pref_learner
        if learner is not None:
            learner.add_transitions(obs, actions, true, dones, extras=extras)
        if self._rollout_phase == PHASE_PRETRAIN:
            self._unsuper_steps_done += n_transitions
            self._pretrain_rollout(obs, seen)
        elif self._rollout_phase == PHASE_PREFERENCE:
            learner = cast(PreferenceLearner, learner)  # the preference phase exists only with a reward model
            self._num_interactions += n_transitions
            due = learner.n_rounds == 0 or self._num_interactions >= self.num_interaction
            # Past the budget a round can still bring a teacher's late labels (query_round returns {} otherwise).
            if due:
                self._log_round(learner.query_round())
                self._num_interactions = 0
            predicted = learner.predict_rewards(obs, actions)
            self._write_rewards(predicted, seen)
            if predicted.std() > 0 and true.std() > 0:
                self.logger.record("reward/pred_true_corr", float(np.corrcoef(predicted.ravel(), true.ravel())[0, 1]))
        self.logger.record("reward/phase", self._rollout_phase)
        if learner is not None:
            for key, value in learner.counters().items():
                self.logger.record(f"reward/{key}", value)

    def _log_round(self, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            self.logger.record(f"reward/{key}", value)

    # ------------------------------------------------------------------ the buffer's hooks
    def _pretrain_rollout(self, obs: np.ndarray, seen: np.ndarray) -> None:
        """
        A pretraining rollout is complete: give its transitions their state-entropy reward.

        :param obs: ``(T, n_envs, obs_dim)`` encoded raw observations the actions were taken in
        :param seen: ``(T, n_envs)`` rewards the env returned to the algorithm
        """
        raise NotImplementedError

    def _write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        """
        A preference-phase rollout is complete: the algorithm trains on ``predicted`` from now on.

        :param predicted: ``(T, n_envs)`` the reward model's rewards of the rollout's transitions
        :param seen: ``(T, n_envs)`` rewards the env returned to the algorithm
        """
        raise NotImplementedError

    def _reset_value_head(self) -> None:
        """Pretraining has ended: forget the values the state-entropy reward taught."""
        raise NotImplementedError
