"""RL^2 (Duan et al. 2016) as a thin subclass of sb3-contrib's RecurrentPPO."""

import warnings
from collections import deque
from typing import Any, ClassVar, Optional, TypeVar, Union, cast

import numpy as np
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.common.controller import PHASE_PREFERENCE, PHASE_PRETRAIN
from sb3_pref.common.onpolicy import PreferenceRewardMixin
from sb3_pref.common.options import ON_POLICY, document_options
from sb3_pref.envs.trial import (
    EPISODE_INDEX_KEY,
    EPISODE_RETURN_KEY,
    EPISODE_SUCCESS_KEY,
    TrialObservationLayout,
    TrialWrapper,
)
from sb3_pref.rl2.policies import (
    CnnGruPolicy,
    CnnLstmPolicy,
    MlpGruPolicy,
    MlpLstmPolicy,
    MultiInputGruPolicy,
    MultiInputLstmPolicy,
)
from sb3_pref.rl2.reward_slot import LearnedRewardObservation

SelfRL2 = TypeVar("SelfRL2", bound="RL2")


@document_options(ON_POLICY)
class RL2(PreferenceRewardMixin, RecurrentPPO):
    """
    RL^2: a recurrent policy trained with PPO on trials of several episodes of one task, so that
    it learns to adapt within a trial from its own history.

    Meant for envs wrapped in :class:`sb3_pref.envs.trial.TrialWrapper`. The wrapper reports ``done``
    only at trial ends, so RecurrentPPO's ``episode_starts`` are trial starts: the hidden state is
    reset at trial starts and carried across the inner episodes of a trial, and GAE runs across
    inner episodes but stops at trial ends. No change to RecurrentPPO's rollout is needed for that.

    What RL2 adds to RecurrentPPO:

    - policies with a GRU option (``"MlpGruPolicy"``, or ``policy_kwargs=dict(recurrent_cell="gru")``)
      whose training pass runs each minibatch through the recurrent module in one call
      (:class:`sb3_pref.rl2.policies.RL2Policy`), which gives identical values and is faster;
    - per-episode-index logging: ``rollout/return_ep{k}`` and ``rollout/success_ep{k}`` for the k-th
      (0-based) inner episode of a trial, means over the last ``stats_window_size`` trials, read from
      the ``info`` keys the trial wrapper writes.

    With ``Monitor`` around the trial wrapper (as ``make_vec_env`` does), ``rollout/ep_rew_mean`` is
    the mean trial return and ``rollout/success_rate`` the success of a trial's last episode.

    :param policy: the policy model (``"MlpLstmPolicy"``, ``"MlpGruPolicy"``, ... or a class)
    :param env: the environment to learn from, usually trial-wrapped; a warning is issued otherwise
    :param kwargs: every other argument of ``RecurrentPPO`` (``learning_rate``, ``n_steps``,
        ``batch_size``, ``gamma``, ``gae_lambda``, ``ent_coef``, ``policy_kwargs``, ``seed``, ...), and the
        preference options below (``unsuper_flag`` defaults to 0 here: no pretraining)

    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpLstmPolicy": MlpLstmPolicy,
        "MlpGruPolicy": MlpGruPolicy,
        "CnnLstmPolicy": CnnLstmPolicy,
        "CnnGruPolicy": CnnGruPolicy,
        "MultiInputLstmPolicy": MultiInputLstmPolicy,
        "MultiInputGruPolicy": MultiInputGruPolicy,
    }

    default_unsuper_flag = 0

    def __init__(self, policy: Union[str, type[RecurrentActorCriticPolicy]], env: Union[GymEnv, str], **kwargs: Any) -> None:
        self._trial_layout: Optional[dict[str, tuple[int, int]]] = None
        super().__init__(policy, env, **kwargs)
        self._episode_returns: dict[int, deque] = {}
        self._episode_successes: dict[int, deque] = {}
        if self.env is not None and not any(self.env.env_is_wrapped(TrialWrapper)):
            warnings.warn(
                "RL2 got an env without TrialWrapper: hidden states will reset at every episode, which is "
                "plain RecurrentPPO. Wrap each env in sb3_pref.envs.trial.TrialWrapper to train on trials.",
                stacklevel=2,
            )

    # ------------------------------------------------------- learned rewards
    def _setup_model(self) -> None:
        # The layout first: the reward model sees only the inner observation of a trial.
        if self.env is not None and any(self.env.env_is_wrapped(TrialWrapper)):
            layout: TrialObservationLayout = self.env.get_attr("layout", indices=0)[0]
            self._trial_layout = {name: (part.start, part.stop) for name, part in vars(layout).items()}
        super()._setup_model()
        if self.pref_learner is not None and self.env is not None:
            self.env = self._with_learned_reward_slot(self.env)

    def _layout(self) -> Optional[TrialObservationLayout]:
        if self._trial_layout is None:
            return None
        return TrialObservationLayout(**{name: slice(*bounds) for name, bounds in self._trial_layout.items()})

    def _with_learned_reward_slot(self, env: VecEnv) -> VecEnv:
        """``env`` with the previous-reward input replaced by the learned reward (once)."""
        layout = self._layout()
        if layout is None or isinstance(env, LearnedRewardObservation):
            return env
        learner, encoder = self.preference.learner, self._pref_encoder
        assert learner is not None and encoder is not None, "callers check there is a learner; the encoder comes with it"
        return LearnedRewardObservation(env, learner.predict_rewards, encoder.encode_actions, layout)

    def set_env(self, env: GymEnv, force_reset: bool = True) -> None:
        super().set_env(env, force_reset=force_reset)
        if self.pref_learner is not None:
            self.env = self._with_learned_reward_slot(cast(VecEnv, self.env))  # set just above

    def prepare_eval_env(self, env: VecEnv) -> VecEnv:
        """The env an evaluation should use: with the learned reward in the policy's input when there is one."""
        return self._with_learned_reward_slot(env) if self.pref_learner is not None else env

    def _reward_space_hint(self) -> tuple[str, str]:
        layout = self._layout()
        if layout is None:
            return super()._reward_space_hint()
        # The reward model sees the inner observation only, not the whole trial observation.
        width = layout.obs.stop - layout.obs.start
        return str(width), (
            f": RL2's reward model sees a trial's inner observation ({width} wide, "
            "env.get_attr('layout', indices=0)[0].obs), not the trial's whole observation; or give "
            "reward_model_kwargs={...}, which builds it so"
        )

    def _reward_observation_space(self) -> spaces.Space:
        layout = self._layout()
        if layout is None:
            return self.observation_space
        size = layout.obs.stop - layout.obs.start
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)

    def _reward_observation(self, obs: Union[np.ndarray, dict]) -> Union[np.ndarray, dict]:
        layout = self._layout()
        # a trial observation is a flat array (Box), never a dict
        return obs if layout is None else cast(np.ndarray, obs)[..., layout.obs]

    def _segment_ends(self, dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray:
        # Preference segments stay inside one inner episode, as the teacher judges episodes.
        return np.asarray(dones, dtype=bool) | np.array([EPISODE_RETURN_KEY in info for info in infos])

    def _begin_rollout(self) -> None:
        super()._begin_rollout()
        if isinstance(self.env, LearnedRewardObservation):
            fill = {PHASE_PREFERENCE: "predicted", PHASE_PRETRAIN: "zero"}
            self.env.fill = fill.get(self.preference.rollout_phase, "true")

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        # Same lifetime as SB3's ep_info_buffer: kept across learn() calls unless counters are reset.
        if reset_num_timesteps:
            self._episode_returns = {}
            self._episode_successes = {}
        return super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)

    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: Optional[np.ndarray] = None) -> None:
        super()._update_info_buffer(infos, dones)
        for info in infos:
            if EPISODE_RETURN_KEY not in info:
                continue
            index = int(info[EPISODE_INDEX_KEY])
            self._window(self._episode_returns, index).append(float(info[EPISODE_RETURN_KEY]))
            if EPISODE_SUCCESS_KEY in info:
                self._window(self._episode_successes, index).append(float(info[EPISODE_SUCCESS_KEY]))

    def _window(self, windows: dict[int, deque], index: int) -> deque:
        if index not in windows:
            windows[index] = deque(maxlen=self._stats_window_size)
        return windows[index]

    def dump_logs(self, iteration: int = 0) -> None:
        """
        Record the per-episode-index means, then write the log as RecurrentPPO does.

        :param iteration: current logging iteration
        """
        for index, returns in sorted(self._episode_returns.items()):
            self.logger.record(f"rollout/return_ep{index}", float(np.mean(returns)))
        for index, successes in sorted(self._episode_successes.items()):
            self.logger.record(f"rollout/success_ep{index}", float(np.mean(successes)))
        super().dump_logs(iteration)

    def learn(  # type: ignore[override]  # unsuper_flag reaches the mixin's learn by name, through **kwargs
        self: SelfRL2,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: Optional[str] = "RL2",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        **kwargs: Any,
    ) -> SelfRL2:
        """
        RecurrentPPO's ``learn``; extra keyword arguments go to the next class in the MRO, so that a
        mixin placed before ``RecurrentPPO`` (e.g. a preference-reward mixin) keeps its own options.
        """
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
            **kwargs,
        )
