"""
What happens in each rollout of a preference-learning on-policy algorithm: the phase it belongs to
(state-entropy pretraining, learning from preferences, or the env's own reward), the query rounds, and
the rewards written into the finished rollout.

The constructor arguments and the set-up are in :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`,
which inherits this mixin; the per-step recording and the rollout-buffer rewrite are in
:mod:`sb3_pref.common.rollout`.
"""

import sys
import warnings
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback
from stable_baselines3.common.type_aliases import MaybeCallback
from torch import nn

from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner
from sb3_pref.common.preprocessing import FeatureEncoder
from sb3_pref.common.rollout import (
    PHASE_PREFERENCE,
    PHASE_PRETRAIN,
    PHASE_TRUE_REWARD,
    RolloutRecorder,
    relabel_rollout,
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
    from sb3_pref.common.rlhf import RLHFMixin as _Base
else:
    _Base = object


class PreferencePhasesMixin(_Base):
    """The rollout side of :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin` (whose docstring lists the arguments)."""

    pref_learner: Optional[PreferenceLearner]
    entropy_reward: Optional[StateEntropyReward]
    entropy_capacity: int
    entropy_k: int
    unsuper_flag: int
    unsuper_step: int
    unsuper_reset_policy: bool
    _policy_before_pretraining: Optional[dict[str, th.Tensor]]
    unsuper_n_epochs: Optional[int]
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

    def _reset_value_head(self) -> None:
        """Re-initialise the value head (as SB3 initialises it) when the reward it predicted changes."""
        value_net: nn.Linear = self.policy.value_net
        for parameter in value_net.parameters():
            self.policy.optimizer.state.pop(parameter, None)
        if self.zero_value_head:  # the RLHF document's N(0, 0) value head
            nn.init.zeros_(value_net.weight)
        else:
            nn.init.orthogonal_(value_net.weight, gain=1.0)
        nn.init.zeros_(value_net.bias)

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
        self._rlhf_stash(obs)
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

    def _pretrain_rollout(self, obs: np.ndarray, seen: np.ndarray) -> None:
        """
        On-policy pretraining: the rollout's rewards become the k-NN state-entropy reward of the states acted in.

        :param obs: ``(T, n_envs, obs_dim)`` encoded raw observations the actions were taken in
        :param seen: ``(T, n_envs)`` rewards the env returned to the algorithm
        """
        n_transitions = seen.size
        if self.entropy_reward is None:
            # B-Pref keeps unsuper_step observations; bounded here so that a huge unsuper_step
            # cannot allocate more than entropy_capacity rows (one rollout always fits).
            capacity = max(min(self.unsuper_step, self.entropy_capacity), n_transitions)
            self.entropy_reward = StateEntropyReward(obs.shape[-1], capacity=capacity, k=self.entropy_k)
        # As B-Pref: each transition is scored by the observation its action was taken in (see
        # docs/bpref-differences.md for the neighbours).
        intrinsic = self.entropy_reward.compute(obs.reshape(n_transitions, -1)).reshape(seen.shape)
        relabel_rollout(self.rollout_buffer, intrinsic, seen)
        self.logger.record("reward/entropy_reward_mean", float(intrinsic.mean()))

    def _write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        """On-policy: the finished rollout trains on ``predicted`` ``(T, n_envs)`` (see :func:`relabel_rollout`)."""
        relabel_rollout(self.rollout_buffer, self._rlhf_rewards(predicted), seen)

    def _log_round(self, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            self.logger.record(f"reward/{key}", value)

    def train(self, *args: Any, **kwargs: Any) -> None:
        """
        The algorithm's update, with ``unsuper_n_epochs`` epochs while pretraining.

        :param args: the algorithm's own ``train`` arguments (none on-policy; an off-policy
            ``train(gradient_steps, batch_size)`` passes straight through, having no epochs)
        :param kwargs: the same, by name
        """
        # Algorithms without epochs (A2C: one gradient step per rollout; SAC) train with their usual update.
        if self._rollout_phase != PHASE_PRETRAIN or not hasattr(self, "n_epochs") or self.unsuper_n_epochs is None:
            return super().train(*args, **kwargs)
        # B-Pref trains the policy harder on the intrinsic reward.
        n_epochs: int = self.n_epochs  # type: ignore[has-type]
        self.n_epochs = self.unsuper_n_epochs
        try:
            return super().train(*args, **kwargs)
        finally:
            self.n_epochs = n_epochs
