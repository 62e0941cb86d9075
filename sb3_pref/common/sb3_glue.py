"""
Plugs the preference core into SB3 algorithms without rewriting their rollout loops.

:class:`PreferenceAlgorithmMixin` is what every preference-learning algorithm shares, on-policy or off-policy:
the constructor arguments and their checks, the set-up of the reward model, teacher and learner (on creation and
on load), the reward features, the phases of :mod:`sb3_pref.common.phases` and the saved state of
:mod:`sb3_pref.common.persistence`. Where the learned rewards go depends on the buffer, and belongs to the family:
each implements the three hooks the phases call (``_pretrain_rollout``, ``_write_rewards``, ``_reset_value_head``).

:class:`PreferenceRewardMixin` is the on-policy family (PPO, A2C, RecurrentPPO). A transition's path:
``collect_rollouts`` steps the env and calls the callbacks; the :class:`RolloutRecorder` (always the first
callback) copies the raw observation, the executed action, the true reward and the done flag. When the rollout is
complete, and before any other callback sees it, :meth:`~sb3_pref.common.phases.PreferencePhasesMixin._finish_rollout`
hands the transitions to the :class:`~sb3_pref.common.learner.PreferenceLearner`, runs a query round when one is
due, predicts the whole rollout's rewards in one batched pass and writes them into the rollout buffer with
:func:`relabel_rollout`, which keeps SB3's time-limit bootstrap and recomputes the advantages. Only this family
has RLHF's KL penalty and reference samples (:class:`~sb3_pref.common.rlhf.RLHFMixin`), a value head to reset
and pretraining epochs.

The off-policy family (a replay buffer: ``SAC_REWARD``) is :class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin`,
which builds on :class:`PreferenceAlgorithmMixin` alone.
"""

import inspect
from typing import Any, Callable, Optional, Union, cast

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import LinearSchedule
from torch import nn

from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner, make_teacher
from sb3_pref.common.options import (
    ON_POLICY,
    PREFERENCE_OPTIONS,
    PreferenceOption,
    check_option_combinations,
    check_options,
    document_options,
    learner_options,
    refuse_other_family,
    takes_options,
)
from sb3_pref.common.persistence import PreferencePersistenceMixin
from sb3_pref.common.phases import PreferencePhasesMixin
from sb3_pref.common.preprocessing import FeatureEncoder
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.rlhf import RLHFMixin
from sb3_pref.common.rollout import (
    PHASE_PREFERENCE,
    PHASE_PRETRAIN,
    PHASE_TRUE_REWARD,
    RolloutRecorder,
    relabel_rollout,
)
from sb3_pref.common.teachers import ScriptedTeacher
from sb3_pref.common.validation import check_same_reward_model, check_segment_fits


class PreferenceAlgorithmMixin(PreferencePhasesMixin, PreferencePersistenceMixin):
    """
    The part of a preference-learning algorithm that does not depend on its buffer: the base of
    :class:`PreferenceRewardMixin` and :class:`~sb3_pref.common.offpolicy.OffPolicyPreferenceMixin`, whose
    docstrings list the options.

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
    reward_model_kwargs: Optional[dict[str, Any]]
    teacher: Any
    num_interaction: int
    feed_type: Union[int, str]
    re_update: int
    max_feed: int
    unsuper_step: int
    unsuper_flag: int
    segment_capacity: int
    entropy_k: int
    anneal_policy_lr: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        known = self._known_options()
        given = {option.name: kwargs.pop(option.name) for option in known if option.name in kwargs}
        refuse_other_family(given, self.option_family, type(self).__name__)
        # Everything is checked before anything is changed: a bad value never reaches the caller's reward model.
        checked = check_options({**{option.name: option.default_for(self.option_family) for option in known}, **given})
        check_option_combinations(checked)
        reward_model, reward_model_kwargs = checked["reward_model"], checked["reward_model_kwargs"]
        size_segment = checked["size_segment"]
        self._check_reward_model_arguments(reward_model, reward_model_kwargs, checked)
        for option in known:
            if option.stored:
                setattr(self, option.name, checked[option.name])
        if self.unsuper_flag is None:
            self.unsuper_flag = self.default_unsuper_flag if reward_model is not None or reward_model_kwargs else 0
        previous_segment = reward_model.size_segment if reward_model is not None else None
        if size_segment is not None and reward_model is not None:
            reward_model.size_segment = size_segment
        self.reward_model_kwargs = dict(reward_model_kwargs) if reward_model_kwargs else None
        if self.reward_model_kwargs is not None and size_segment is not None:
            self.reward_model_kwargs["size_segment"] = size_segment
        # Progress that must survive save/load (plain values, stored in SB3's data file).
        self._num_interactions = 0
        self._unsuper_steps_done = 0
        self._pretrain_done = False
        # The policy as pretraining found it, while pretraining runs with unsuper_reset_policy (saved in pref_state).
        self._policy_before_pretraining: Optional[dict[str, th.Tensor]] = None
        self._rollout_phase = PHASE_TRUE_REWARD
        self._reward_model_config = reward_model.get_config() if reward_model is not None else None
        self._teacher_class: Optional[str] = None
        self.pref_learner: Optional[PreferenceLearner] = None
        self.entropy_reward: Optional[StateEntropyReward] = None
        try:
            super().__init__(*args, **kwargs)
        except Exception:
            # A call refused by the checks against the env leaves the caller's reward model as it was.
            if reward_model is not None and previous_segment is not None:
                reward_model.size_segment = previous_segment
            raise

    @classmethod
    def _known_options(cls) -> tuple[PreferenceOption, ...]:
        """The options this class takes, and the on-policy ones the shared code reads (at their defaults elsewhere)."""
        family = cls.option_family
        return tuple(option for option in PREFERENCE_OPTIONS if ON_POLICY in option.families or family in option.families)

    # ------------------------------------------------------------------ set-up
    def _setup_model(self) -> None:
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
        model = self.reward_model
        encoder = cast(FeatureEncoder, self._pref_encoder)  # set by _ensure_encoder
        if (model.obs_dim, model.act_dim) != (encoder.obs_dim, encoder.act_dim):
            raise ValueError(
                f"reward_model was built for obs_dim={model.obs_dim}, act_dim={model.act_dim}, but it must see "
                f"obs_dim={encoder.obs_dim}, act_dim={encoder.act_dim}: build it with "
                f"RewardModel({self._reward_space_hint()}, env.action_space, ...)"
            )
        check_segment_fits(model.size_segment, self.env, self.segment_capacity)
        teacher = self.teacher if self.teacher is not None else model.teacher
        if given_at_load:
            # The caller's teacher is used: its settings win over the saved ones (its class may differ
            # from the saved one's; then none of the saved teacher state applies to it).
            self._teacher_class = type(teacher).__name__
        elif self._teacher_class not in (None, type(teacher).__name__):
            raise ValueError(
                f"this model was trained with a {self._teacher_class}, which is not saved with it: "
                f"pass teacher=<a {self._teacher_class}> to load()"
            )
        self._teacher_class = type(teacher).__name__
        if self.seed is not None and model.n_updates == 0 and model.seed is None:
            # An untrained model (or a fresh teacher) passed in without a seed follows the algorithm's
            # seed, so that the same seed gives the same run.
            model.reset_parameters(self.seed)
        if not given_at_load and self.seed is not None and isinstance(teacher, ScriptedTeacher) and teacher.seed is None:
            if teacher.counters["asked"] == 0:
                teacher.reseed(self.seed)
        self.pref_learner = PreferenceLearner(
            model,
            n_envs=self.n_envs,
            teacher=teacher,
            normalization_sampler=self._normalization_sampler(),
            seed=self.seed,
            **learner_options(self),
        )
        if given_at_load:
            # By preset name: our own new object, which continues the saved counters and label stream
            # under the settings asked for. An object: the caller's settings and generator are kept, and
            # the run's counters and bookkeeping continue in it (a human teacher must know which answers
            # the saved dataset already holds, or it would hand them over twice).
            self.pref_learner.restore_teacher = "progress" if given_at_load == "preset" else "counters"

    def _setup_policy_schedule(self) -> None:
        """Right after the algorithm's own set-up: ``anneal_policy_lr`` (a family may add its own set-up here)."""
        if self.anneal_policy_lr and not callable(self.learning_rate):
            # SB3's progress runs from 1 to 0 over each learn() call: the lr reaches 0 at its end.
            self.learning_rate = LinearSchedule(float(self.learning_rate), 0.0, 1.0)
            self._setup_lr_schedule()

    def _normalization_sampler(self) -> Optional[Callable[[], np.ndarray]]:
        """The samples the reward's gain/bias are fitted on; None: the learner's recent transitions."""
        return None

    def _reward_space_hint(self) -> str:
        """How the error for a reward model of the wrong size names the space it must be built for."""
        return "env.observation_space"

    @classmethod
    def _check_reward_model_arguments(
        cls, reward_model: Optional[RewardModel], reward_model_kwargs: Optional[dict[str, Any]], arguments: dict[str, Any]
    ) -> None:
        """Before training starts: a config with preference settings but no model would silently train on the env's reward."""
        if reward_model is not None and reward_model_kwargs is not None:
            raise ValueError("reward_model and reward_model_kwargs were both given: pass one of them")
        if reward_model_kwargs is not None and not isinstance(reward_model_kwargs, dict):
            raise ValueError(f"reward_model_kwargs must be a dict of RewardModel arguments, got {reward_model_kwargs!r}")
        for key in ("obs_dim", "act_dim"):
            if key in (reward_model_kwargs or {}):
                raise ValueError(f"reward_model_kwargs must not contain {key!r}: the env's spaces are used")
        if reward_model is not None or reward_model_kwargs is not None:
            return
        # The class's own defaults where it lists them (a subclass may change them, and load() rebuilds the
        # object with them), the declared ones for a class that passes **kwargs on (RL2).
        own = inspect.signature(cls.__init__).parameters
        defaults = {option.name: option.default_for(cls.option_family) for option in cls._known_options()}
        defaults.update({name: parameter.default for name, parameter in own.items() if name in defaults})
        given = [
            option.name for option in cls._known_options()
            if option.model_only and option.name in arguments and arguments[option.name] != defaults[option.name]
        ]  # fmt: skip
        if given:
            raise ValueError(
                f"{', '.join(given)} given without a reward model: they only apply to preference learning. Pass "
                "reward_model=RewardModel(env.observation_space, env.action_space, ...) or reward_model_kwargs={...} "
                "(e.g. in a YAML config), or remove them to train on the env's reward"
            )

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


@document_options(ON_POLICY)
class PreferenceRewardMixin(PreferenceAlgorithmMixin, RLHFMixin):
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

    @takes_options(ON_POLICY)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Only stored here; PreferenceAlgorithmMixin.__init__ checks the value before the algorithm is built.
        self._init_rlhf(kwargs.get("reference_policy"))
        super().__init__(*args, **kwargs)

    def _setup_policy_schedule(self) -> None:
        super()._setup_policy_schedule()
        self._setup_rlhf()

    def _normalization_sampler(self) -> Optional[Callable[[], np.ndarray]]:
        return self._reference_features if self.normalize_reward_samples == "reference" else None

    # ------------------------------------------------------------------ the rollout's rewards
    def _finish_rollout(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        true: np.ndarray,
        seen: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        self._rlhf_stash(obs)
        super()._finish_rollout(obs, actions, true, seen, dones, extras=extras)

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
        """The finished rollout trains on ``predicted`` ``(T, n_envs)`` (see :func:`relabel_rollout`)."""
        relabel_rollout(self.rollout_buffer, self._rlhf_rewards(predicted), seen)

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

    # ---------------------------------------------------------------- training
    def train(self) -> None:
        """The algorithm's update, with ``unsuper_n_epochs`` epochs while pretraining."""
        # Algorithms without epochs (A2C: one gradient step per rollout) train with their usual update.
        if self._rollout_phase != PHASE_PRETRAIN or not hasattr(self, "n_epochs") or self.unsuper_n_epochs is None:
            return super().train()
        # B-Pref trains the policy harder on the intrinsic reward.
        n_epochs: int = self.n_epochs
        self.n_epochs = self.unsuper_n_epochs
        try:
            return super().train()
        finally:
            self.n_epochs = n_epochs

    # ------------------------------------------------------------------ save / load
    def _excluded_save_params(self) -> list[str]:
        rlhf = ["reference_policy", "_reference_input", "_reference_kl", "_rollout_stash", "_rlhf_rng"]
        return [*super()._excluded_save_params(), *rlhf]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        if self.reference_policy is not None:
            state_dicts = [*state_dicts, "reference_policy"]
        return state_dicts, variables


__all__ = [
    "PHASE_PREFERENCE",
    "PHASE_PRETRAIN",
    "PHASE_TRUE_REWARD",
    "PreferenceAlgorithmMixin",
    "PreferenceRewardMixin",
    "RolloutRecorder",
    "relabel_rollout",
]
