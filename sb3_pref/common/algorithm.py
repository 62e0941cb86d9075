"""
What every preference-learning algorithm shares, on-policy or off-policy: :class:`PreferenceAlgorithmMixin` takes,
checks and stores the declared options, sets up the reward model, teacher and learner (on creation and on load),
computes the reward features, and runs ``learn`` and the recorder; ``save``/``load`` are its base's,
:class:`~sb3_pref.common.algorithm_io.PreferenceSaveMixin` (the file format). What happens in a rollout belongs
to the :class:`~sb3_pref.common.controller.PreferenceController` it holds (``preference``); where the rewards go, to the
:class:`~sb3_pref.common.controller.RewardWriter` its family makes (:meth:`PreferenceAlgorithmMixin._make_reward_writer`):
:class:`~sb3_pref.common.onpolicy.PreferenceRewardMixin` for a rollout buffer,
:class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin` for a replay buffer.
"""

import inspect
from typing import Any, Callable, Optional, Union

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.utils import LinearSchedule

from sb3_pref.common.algorithm_io import PreferenceSaveMixin
from sb3_pref.common.controller import PreferenceController, RewardWriter
from sb3_pref.common.options import (
    ON_POLICY,
    PREFERENCE_OPTIONS,
    PreferenceOption,
    check_option_combinations,
    check_options,
    learner_options,
    options_of,
    refuse_other_family,
)
from sb3_pref.common.rollout import RolloutRecorder
from sb3_pref.common.validation import (
    check_env_kind,
    check_reward_model_arguments,
    check_reward_model_fits,
    check_same_reward_model,
    check_segment_fits,
    check_teacher_class,
)
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.feedback_plan import FeedbackPlan, continue_plan, default_feed_type, plan_feedback
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.core.preprocessing import FeatureEncoder
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.teachers import make_teacher


def _old_name(owner: str, name: str) -> Any:
    """A read-only property that reads ``self.<owner>.<name>``: a value under its old attribute name."""
    return property(lambda self: getattr(getattr(self, owner), name), doc=f"``{owner}.{name}``, read-only")


class PreferenceAlgorithmMixin(PreferenceSaveMixin):
    """
    The part of a preference-learning algorithm that does not depend on its buffer: the base of
    :class:`~sb3_pref.common.onpolicy.PreferenceRewardMixin` and
    :class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin`, whose docstrings list the options. It holds
    one :class:`~sb3_pref.common.controller.PreferenceController` (``preference``) and the reward writer of its
    family (:meth:`_make_reward_writer`), and is the :class:`~sb3_pref.common.rollout.RolloutHost` the recorder
    reports to. ``save``, ``load`` and ``pref_state`` come from its base,
    :class:`~sb3_pref.common.algorithm_io.PreferenceSaveMixin`.

    Its constructor takes the preference options of :mod:`sb3_pref.common.options` by keyword (the algorithm's
    own arguments pass through ``args`` and ``kwargs``), checks them all before anything is changed, and stores
    each under its name.

    :param args: the algorithm's positional arguments
    :param kwargs: the algorithm's keyword arguments and the preference options
    """

    #: the algorithm family: which options it takes and their defaults (see :mod:`sb3_pref.common.options`)
    option_family: str = ON_POLICY
    #: pretraining default when a reward model is given (B-Pref's PrefPPO pretrains)
    default_unsuper_flag: int = 1

    # For type checkers: the options stored by __init__ (declared in sb3_pref.common.options).
    reward_model: Optional[RewardModel]
    reward_model_kwargs: Optional[dict[str, Any]]
    teacher: Any
    feedback_schedule: str
    num_interaction: Optional[int]
    feed_type: Union[int, str]
    re_update: Optional[int]
    max_feed: int
    unsuper_step: Optional[int]
    unsuper_flag: int
    unsuper_reset_policy: bool
    segment_capacity: int
    entropy_k: int
    anneal_policy_lr: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        writer = self._make_reward_writer(kwargs)
        known = self._known_options()
        # Every declared option is taken out of SB3's kwargs: the other family's are refused unless at their defaults.
        given = {option.name: kwargs.pop(option.name) for option in PREFERENCE_OPTIONS if option.name in kwargs}
        refuse_other_family(given, self.option_family, type(self).__name__)
        given = {option.name: given[option.name] for option in known if option.name in given}
        # Everything is checked before anything is changed: a bad value never reaches the caller's reward model.
        checked = check_options({**{option.name: option.default_for(self.option_family) for option in known}, **given})
        check_option_combinations(checked)
        reward_model, reward_model_kwargs = checked["reward_model"], checked["reward_model_kwargs"]
        size_segment = checked["size_segment"]
        self._check_reward_model_arguments(reward_model, reward_model_kwargs, checked)
        for option in known:
            if option.stored:
                setattr(self, option.name, checked[option.name])
        if self.feed_type is None:
            # QPA draws its policy-aligned pairs uniformly
            self.feed_type = "uniform" if self.qpa_episodes else default_feed_type(self.feedback_schedule)
        if self.unsuper_flag is None:
            self.unsuper_flag = self.default_unsuper_flag if reward_model is not None or reward_model_kwargs is not None else 0
        previous_segment = reward_model.size_segment if reward_model is not None else None
        if size_segment is not None and reward_model is not None:
            reward_model.size_segment = size_segment
        # {} is a reward model of the default settings, not none: only None leaves the env's reward
        self.reward_model_kwargs = dict(reward_model_kwargs) if reward_model_kwargs is not None else None
        if self.reward_model_kwargs is not None and size_segment is not None:
            self.reward_model_kwargs["size_segment"] = size_segment
        self._reward_model_config = reward_model.get_config() if reward_model is not None else None
        self._teacher_class: Optional[str] = None
        # The phases, learner and saved progress, and where the rewards go (kept across save/load, see save()).
        self._reward_writer = writer
        self.preference = PreferenceController(self, writer)
        check_env_kind(args[1] if len(args) > 1 else kwargs.get("env"))
        try:
            super().__init__(*args, **kwargs)
        except Exception:
            # A call refused by the checks against the env leaves the caller's reward model as it was.
            if reward_model is not None and previous_segment is not None:
                reward_model.size_segment = previous_segment
            raise

    @classmethod
    def _known_options(cls) -> tuple[PreferenceOption, ...]:
        """The options this class takes (its family's): an off-policy algorithm stores none of the on-policy ones."""
        return options_of(cls.option_family)

    # ------------------------------------------------------------------ set-up
    def _make_reward_writer(self, kwargs: dict[str, Any]) -> RewardWriter:
        """:param kwargs: the constructor's keyword arguments; :return: the family's writer (before the checks)"""
        raise NotImplementedError

    def _setup_model(self) -> None:
        # SB3's load() has set the saved values as attributes (see save()): they belong to the controller.
        saved = {name: self.__dict__.pop(name) for name in self.preference.saved_values() if name in self.__dict__}
        self.preference.load_saved_values(saved)
        # load() sets attributes from its keyword arguments without calling __init__: check them again.
        stored = {option.name: getattr(self, option.name) for option in self._known_options() if option.stored}
        check_option_combinations(
            {**check_options(stored), "size_segment": None, "reference_policy": getattr(self, "reference_source", None)}
        )
        super()._setup_model()
        self._setup_policy_schedule()
        # Also on load, where teacher=... may be given to load() as a preset name or an object.
        given_at_load = getattr(self, "_teacher_given_at_load", False)
        self._teacher_given_at_load = False
        self.teacher = make_teacher(self.teacher)
        self._pref_encoder: Optional[FeatureEncoder] = None
        if self.reward_model is None and self.reward_model_kwargs is not None:
            # Built here, on creation and on load alike, from the spaces SB3 has just set up.
            self.reward_model = RewardModel(self._reward_observation_space(), self.action_space, **self.reward_model_kwargs)
            self._reward_model_config = self.reward_model.get_config()
        elif self.reward_model is None and self._reward_model_config is not None:
            # Loading: the weights arrive afterwards through set_parameters.
            self.reward_model = RewardModel.from_config(self._reward_model_config, teacher=self.teacher)
        elif self.reward_model is not None and self._reward_model_config is not None:
            # A reward model handed to load() must fit the saved weights and the saved segments.
            check_same_reward_model(self._reward_model_config, self.reward_model.get_config())
        # After the reward model is rebuilt: a model saved with unsuper_flag=0 needs the encoder too.
        self._ensure_encoder()
        if self.reward_model is None:
            return
        model, encoder = self.reward_model, self._pref_encoder
        assert encoder is not None, "set up by _ensure_encoder with the reward model"
        check_reward_model_fits(model, encoder.obs_dim, encoder.act_dim, *self._reward_space_hint())
        check_segment_fits(model.size_segment, self.env, self.segment_capacity)
        teacher = self.teacher if self.teacher is not None else model.teacher
        self._teacher_class = check_teacher_class(self._teacher_class, teacher, given_at_load)
        self.preference.setup_learner(
            model, teacher, n_envs=self.n_envs, seed=self.seed, given_at_load=given_at_load,
            normalization_sampler=self._normalization_sampler(), options=learner_options(self),
        )  # fmt: skip

    def _setup_policy_schedule(self) -> None:
        """Right after the algorithm's own set-up: ``anneal_policy_lr`` (a family may add its own set-up here)."""
        if self.anneal_policy_lr and not callable(self.learning_rate):
            # SB3's progress runs from 1 to 0 over each learn() call: the lr reaches 0 at its end.
            self.learning_rate = LinearSchedule(float(self.learning_rate), 0.0, 1.0)
            self._setup_lr_schedule()

    def _normalization_sampler(self) -> Optional[Callable[[], np.ndarray]]:
        """The samples the reward's gain/bias are fitted on; None: the learner's recent transitions."""
        return None

    def _reward_space_hint(self) -> tuple[str, str]:
        """How the error for a reward model of the wrong size names the space it must be built for, and why."""
        return "env.observation_space", ""

    @classmethod
    def _check_reward_model_arguments(
        cls, reward_model: Optional[RewardModel], reward_model_kwargs: Optional[dict[str, Any]], arguments: dict[str, Any]
    ) -> None:
        """Before training starts: a config with preference settings but no model would silently train on the env's reward."""
        # The class's own defaults where it lists them (a subclass may change them, and load() rebuilds the
        # object with them), the declared ones for a class that passes **kwargs on (RL2).
        own = inspect.signature(cls.__init__).parameters
        family = cls.option_family
        model_only = {option.name: option.default_for(family) for option in cls._known_options() if option.model_only}
        defaults = {name: own[name].default if name in own else default for name, default in model_only.items()}
        check_reward_model_arguments(reward_model, reward_model_kwargs, arguments, defaults)

    def _ensure_encoder(self) -> None:
        # Only runs that learn a reward or pretrain need flat features (image envs can still use the true reward).
        if self._pref_encoder is None and (self.reward_model is not None or self.unsuper_flag in (1, 2)):
            self._pref_encoder = FeatureEncoder(self._reward_observation_space(), self.action_space)

    def _reward_observation_space(self) -> spaces.Space:
        """The part of the observation the reward model and the entropy reward see (all of it here)."""
        return self.observation_space

    def _reward_observation(self, obs: Union[np.ndarray, dict]) -> Union[np.ndarray, dict]:
        """:param obs: a batch of raw observations; :return: the part that :meth:`_reward_observation_space` describes"""
        return obs

    def _reward_features(self, raw_obs: Union[np.ndarray, dict]) -> np.ndarray:
        """:param raw_obs: a batch of raw observations; :return: the flat features the reward model sees of them"""
        assert self._pref_encoder is not None, "the encoder is set up with the reward model or the pretraining"
        return self._pref_encoder.encode_obs(self._reward_observation(raw_obs))

    def _reward_actions(self, actions: np.ndarray) -> np.ndarray:
        """:param actions: a batch of env actions; :return: their features as the reward model sees them"""
        assert self._pref_encoder is not None, "the encoder is set up with the reward model or the pretraining"
        return self._pref_encoder.encode_actions(actions)

    def _segment_ends(self, dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray:
        """Where segments must not cross: episode ends (an algorithm playing several episodes as one may add its own)."""
        return dones

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
        if not isinstance(total_timesteps, (int, float, np.integer, np.floating)) or not total_timesteps >= 0:
            # SB3 would run no step and say nothing; the plan would be made for a negative budget.
            raise ValueError(f"total_timesteps must be a number of env steps >= 0, got {total_timesteps!r}")
        if unsuper_flag is not None:
            if unsuper_flag not in (0, 1, 2):
                raise ValueError(f"unsuper_flag must be 0 (no pretraining), 1 or 2, got {unsuper_flag!r}")
            self.unsuper_flag = unsuper_flag
            self._ensure_encoder()
        self._plan_feedback(total_timesteps, reset_num_timesteps)
        self.preference.warn_if_pretraining_dominates(total_timesteps)
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name or type(self).__name__,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    def _plan_feedback(self, total_timesteps: int, reset_num_timesteps: bool) -> None:
        """
        The feedback plan of this ``learn`` call (:mod:`~sb3_pref.core.feedback_plan`): the settings the user left
        unset, planned from the budget; a continued run (``reset_num_timesteps=False``) keeps the plan in force.
        """
        learner, previous = self.preference.learner, self.preference.plan
        budget = learner.budget_left if learner is not None else 0
        given = self.schedule_given()
        continued = previous is not None and not reset_num_timesteps
        if previous is not None and continued:
            plan = continue_plan(previous, total_timesteps, budget, given)
        else:
            plan = plan_feedback(
                self.feedback_schedule, self.option_family, total_timesteps, budget, self._rollout_steps(), given,
                pretraining=self.unsuper_flag in (1, 2) and not self.preference.pretrain_done,
                first_done=learner is not None and learner.n_rounds > 0, seed_steps=self.preference.writer.seed_steps,
            )  # fmt: skip
        self.preference.apply_plan(plan, continued=continued)

    def schedule_given(self) -> dict[str, Optional[int]]:
        """The schedule settings the user set (None: left to the plan): the options, and the reward model's round sizes."""
        model = self.reward_model
        return {
            "unsuper_step": self.unsuper_step,
            "num_interaction": self.num_interaction,
            "re_update": self.re_update,
            "first_round": model.initial_mb_size if model is not None else None,
            "round_size": model.mb_size if model is not None else None,
        }

    @property
    def feedback_plan(self) -> Optional[FeedbackPlan]:
        """The schedule in force (made by ``learn``; None before the first call): pretraining steps, round sizes, interval."""
        return self.preference.plan

    def _rollout_steps(self) -> int:
        """Env steps (summed over envs) between two chances to ask: a query round can only run at a rollout's end."""
        raise NotImplementedError

    def _init_callback(self, callback: MaybeCallback, progress_bar: bool = False) -> BaseCallback:
        if isinstance(callback, list):
            callback = CallbackList(callback)
        if callback is not None and not isinstance(callback, BaseCallback):
            callback = ConvertCallback(callback)
        # The recorder goes first so that user callbacks see the relabelled rollout.
        recorder = [RolloutRecorder()] if self._pref_encoder is not None else []
        callbacks = recorder + ([callback] if callback is not None else [])
        return super()._init_callback(CallbackList(callbacks), progress_bar)

    # ------------------------------------------------------------------ RolloutHost: the controller's
    def _begin_rollout(self) -> None:
        self.preference.begin_rollout()

    def _segment_info_keys(self) -> tuple[str, ...]:
        return self.preference.segment_info_keys()

    def _finish_rollout(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        true: np.ndarray,
        seen: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        self.preference.finish_rollout(obs, actions, true, seen, dones, extras=extras)

    # ------------------------------------------------------------------ the controller's state, by its old names
    @property
    def pref_learner(self) -> Optional[PreferenceLearner]:
        """The :class:`~sb3_pref.core.learner.PreferenceLearner` (None without a reward model)."""
        return self.preference.learner

    @property
    def entropy_reward(self) -> Optional[StateEntropyReward]:
        """The k-NN state-entropy reward while pretraining runs, else None."""
        return self.preference.entropy_reward

    # Read-only, under the names the values had as the algorithm's attributes (tests and user code read them).
    _rollout_phase = _old_name("preference", "rollout_phase")
    _pretrain_done = _old_name("preference", "pretrain_done")
    _num_interactions = _old_name("preference", "num_interactions")
    _unsuper_steps_done = _old_name("preference", "unsuper_steps_done")
    _policy_before_pretraining = _old_name("preference", "policy_before_pretraining")
