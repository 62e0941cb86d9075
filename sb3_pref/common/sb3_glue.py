"""
Plugs the preference core into any SB3 on-policy algorithm without rewriting its rollout loop: the
constructor arguments, their checks and the set-up of the reward model, teacher and learner.

A transition's path: ``collect_rollouts`` steps the env and calls the callbacks; the
:class:`RolloutRecorder` (always the first callback) copies the raw observation, the executed
action, the true reward and the done flag. When the rollout is complete, and before any other
callback sees it, :meth:`~sb3_pref.common.phases.PreferencePhasesMixin._finish_rollout` hands the
transitions to the :class:`~sb3_pref.common.learner.PreferenceLearner`, runs a query round when one
is due, predicts the whole rollout's rewards in one batched pass and writes them into the rollout
buffer with :func:`relabel_rollout`, which keeps SB3's time-limit bootstrap and recomputes the advantages.
"""

import inspect
from typing import Any, Optional, Union, cast

import numpy as np
import torch as th
from gymnasium import spaces

from sb3_pref.common.checks import check_bool
from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner, make_teacher
from sb3_pref.common.persistence import PreferencePersistenceMixin
from sb3_pref.common.phases import PreferencePhasesMixin
from sb3_pref.common.preprocessing import FeatureEncoder
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.reward_training import check_schedule
from sb3_pref.common.rlhf import ReferenceSource, RLHFMixin
from sb3_pref.common.rollout import (
    PHASE_PREFERENCE,
    PHASE_PRETRAIN,
    PHASE_TRUE_REWARD,
    RolloutRecorder,
    relabel_rollout,
)
from sb3_pref.common.teachers import BaseTeacher, ScriptedTeacher
from sb3_pref.common.validation import (
    check_same_reward_model,
    check_segment_fits,
    validate_preference_args,
)


class PreferenceRewardMixin(PreferencePhasesMixin, PreferencePersistenceMixin, RLHFMixin):
    """
    Preference-based reward learning for an SB3 on-policy algorithm (``class X(PreferenceRewardMixin, PPO)``).

    :param reward_model: the learned reward; None trains on the env's reward (after optional pretraining)
    :param reward_model_kwargs: keyword arguments of :class:`~sb3_pref.common.reward_model.RewardModel`
        without the spaces: the model is then built from the env's spaces in ``_setup_model`` (as SB3
        builds the policy from ``policy_kwargs``), which config files (RL Zoo's YAML, Optuna) can express
    :param teacher: who answers queries: a teacher object or a B-Pref preset name; None uses ``reward_model.teacher``
    :param num_interaction: env steps (summed over envs) between query rounds
    :param num_feed: accepted for B-Pref compatibility (it had no effect there either)
    :param feed_type: query selection: 0-5 or a name (uniform, disagreement, entropy, kcenter,
        kcenter_disagreement, kcenter_entropy)
    :param re_update: the most reward-model epochs per query round (early stop at 97% training accuracy, B-Pref's)
    :param metaworld_flag: accepted for B-Pref compatibility; success is logged whenever the env reports it
    :param max_feed: total feedback budget
    :param unsuper_step: env steps of state-entropy pretraining (summed over envs)
    :param unsuper_n_epochs: PPO epochs per update during pretraining; None (default) keeps the algorithm's
        ``n_epochs``. B-Pref trains 50 epochs on each pretraining rollout (its scripts and grids pass 50): on
        SB3's usual 10 epochs that makes each pretraining update cost 5 normal ones. Ignored by algorithms
        without epochs (e.g. A2C)
    :param unsuper_reset_policy: when pretraining ends, put the policy (and its optimizer) back as it was
        before pretraining: the pretraining data still feed the first queries, but the policy does not
        start learning the task from the state-entropy policy's behaviour. False (default) keeps it, as B-Pref
    :param size_segment: segment length; overrides ``reward_model.size_segment`` when given
    :param max_ep_len: episode length for the teacher's thresholds; None uses the observed mean
    :param unsuper_flag: default of ``learn(unsuper_flag=...)``: 1 pretraining then preferences, 2
        pretraining then the true reward, 0 no pretraining; None: the class's ``default_unsuper_flag``
        with a reward model (PrefPPO: 1), 0 without one
    :param normalize_reward: rescale predicted rewards to mean 0 / std 1 on recent transitions after each refit
    :param anneal_reward_lr: decay the reward model's learning rate linearly to 0 over each round's
        gradient steps (all of them are run: no early stop)
    :param segment_capacity: transitions kept for drawing query segments
    :param entropy_k: k of the k-NN state-entropy reward
    :param reward_schedule: how much the reward model trains per round: ``"auto"`` (default; passes until
        the members' loss on held-out labels stops improving, at most ``re_update`` passes) or
        ``"bpref"`` (B-Pref's: up to ``re_update`` passes over all labels); see
        :mod:`sb3_pref.common.reward_training`
    :param reference_policy: RLHF fine-tuning (docs/howto-finetune.md): penalise the learned reward per
        step by ``kl_coef * (log pi(a|s) - log pi_ref(a|s))`` before GAE. An SB3 policy or model, the
        path of a saved model, or ``"initial"`` (a frozen copy of the policy when ``learn`` is first
        called); its weights are saved with this model. None: no penalty
    :param kl_coef: the KL coefficient (the starting value when ``kl_target`` is set)
    :param kl_target: adapt ``kl_coef`` towards this mean KL per env step (the RLHF document's
        controller); None keeps it fixed
    :param kl_horizon: env steps (summed over envs) of the adaptive controller's horizon
    :param normalize_reward_before: fit the reward's gain/bias before each refit as well (RLHF ``normalize_before``)
    :param normalize_reward_samples: what the gain/bias are fitted on: ``"recent"`` transitions, or
        ``"reference"``: the latest rollout's states with actions drawn from the reference policy
    :param whiten_reward: divide each rollout's rewards by their std, keeping their mean (after the KL penalty)
    :param zero_value_head: value head weights and bias at 0 when training starts and whenever it is reset
    :param anneal_policy_lr: the policy's learning rate decays linearly to 0 over each ``learn`` call
    """

    #: pretraining default when a reward model is given (B-Pref's PrefPPO pretrains)
    default_unsuper_flag: int = 1
    #: most observations the state-entropy buffer keeps (B-Pref keeps ``unsuper_step``, which is
    #: unbounded); rows of ``obs_dim`` float32, so 100k rows of 24 floats take 9.6 MB
    entropy_capacity: int = 100_000
    #: arguments that only mean something with a reward model: given without one, they are an error
    model_only_arguments: tuple[str, ...] = (
        "teacher", "num_interaction", "feed_type", "re_update", "max_feed", "size_segment",
        "normalize_reward", "anneal_reward_lr", "segment_capacity",
    )  # fmt: skip

    def __init__(
        self,
        *args: Any,
        reward_model: Optional[RewardModel] = None,
        reward_model_kwargs: Optional[dict[str, Any]] = None,
        teacher: Union[BaseTeacher, str, None] = None,
        num_interaction: int = 16000,
        num_feed: int = 1,
        feed_type: Union[int, str] = 0,
        re_update: int = 100,
        metaworld_flag: bool = False,
        max_feed: int = 1400,
        unsuper_step: int = 32000,
        unsuper_n_epochs: Optional[int] = None,
        unsuper_reset_policy: bool = False,
        size_segment: Optional[int] = None,
        max_ep_len: Optional[int] = None,
        unsuper_flag: Optional[int] = None,
        normalize_reward: bool = False,
        anneal_reward_lr: bool = False,
        segment_capacity: int = 100_000,
        entropy_k: int = 5,
        reward_schedule: str = "auto",
        reference_policy: ReferenceSource = None,
        kl_coef: float = 0.1,
        kl_target: Optional[float] = None,
        kl_horizon: int = 10_000,
        normalize_reward_before: bool = False,
        normalize_reward_samples: str = "recent",
        whiten_reward: bool = False,
        zero_value_head: bool = False,
        anneal_policy_lr: bool = False,
        **kwargs: Any,
    ) -> None:
        arguments = locals()
        # Everything is checked before anything is changed: a bad value never reaches the caller's reward model.
        checked = validate_preference_args(
            reward_model, teacher, num_interaction, feed_type, re_update, max_feed, unsuper_step, unsuper_n_epochs,
            size_segment, max_ep_len, unsuper_flag, normalize_reward, anneal_reward_lr, segment_capacity, entropy_k,
        )  # fmt: skip
        reward_schedule = check_schedule(reward_schedule, "reward_schedule")
        self._check_reward_model_arguments(reward_model, reward_model_kwargs, arguments)
        if unsuper_flag is None:
            unsuper_flag = self.default_unsuper_flag if reward_model is not None or reward_model_kwargs else 0
        previous_segment = reward_model.size_segment if reward_model is not None else None
        if checked["size_segment"] is not None and reward_model is not None:
            reward_model.size_segment = checked["size_segment"]
        self.reward_model = reward_model
        self.reward_model_kwargs = dict(reward_model_kwargs) if reward_model_kwargs else None
        if self.reward_model_kwargs is not None and size_segment is not None:
            self.reward_model_kwargs["size_segment"] = int(size_segment)
        self.teacher = teacher
        self.num_interaction = checked["num_interaction"]
        self.num_feed = num_feed
        self.feed_type = feed_type
        self.re_update = checked["re_update"]
        self.metaworld_flag = metaworld_flag
        self.max_feed = checked["max_feed"]
        self.unsuper_step = checked["unsuper_step"]
        self.unsuper_n_epochs = checked["unsuper_n_epochs"]
        self.unsuper_reset_policy = check_bool("unsuper_reset_policy", unsuper_reset_policy)
        self.max_ep_len = max_ep_len
        self.unsuper_flag = unsuper_flag
        self.normalize_reward = normalize_reward
        self.anneal_reward_lr = anneal_reward_lr
        self.segment_capacity = checked["segment_capacity"]
        self.entropy_k = checked["entropy_k"]
        self.reward_schedule = reward_schedule
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
        self._init_rlhf(
            reference_policy,
            kl_coef=kl_coef,
            kl_target=kl_target,
            kl_horizon=kl_horizon,
            normalize_reward_before=normalize_reward_before,
            normalize_reward_samples=normalize_reward_samples,
            whiten_reward=whiten_reward,
            zero_value_head=zero_value_head,
            anneal_policy_lr=anneal_policy_lr,
        )
        try:
            super().__init__(*args, **kwargs)
        except Exception:
            # A call refused by the checks against the env leaves the caller's reward model as it was.
            if reward_model is not None and previous_segment is not None:
                reward_model.size_segment = previous_segment
            raise

    # ------------------------------------------------------------------ set-up
    def _setup_model(self) -> None:
        # load() sets attributes from its keyword arguments without calling __init__: check them again.
        validate_preference_args(
            self.reward_model, self.teacher, self.num_interaction, self.feed_type, self.re_update, self.max_feed,
            self.unsuper_step, self.unsuper_n_epochs, None, self.max_ep_len, self.unsuper_flag, self.normalize_reward,
            self.anneal_reward_lr, self.segment_capacity, self.entropy_k,
        )  # fmt: skip
        super()._setup_model()
        self._setup_rlhf()
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
            feed_type=self.feed_type,
            max_feed=self.max_feed,
            re_update=self.re_update,
            max_ep_len=self.max_ep_len,
            segment_capacity=self.segment_capacity,
            normalize_rewards=self.normalize_reward,
            anneal_lr=self.anneal_reward_lr,
            normalize_before=self.normalize_reward_before,
            normalization_sampler=self._reference_features if self.normalize_reward_samples == "reference" else None,
            seed=self.seed,
            schedule=self.reward_schedule,
        )
        if given_at_load:
            # By preset name: our own new object, which continues the saved counters and label stream
            # under the settings asked for. An object: the caller's settings and generator are kept, and
            # the run's counters and bookkeeping continue in it (a human teacher must know which answers
            # the saved dataset already holds, or it would hand them over twice).
            self.pref_learner.restore_teacher = "progress" if given_at_load == "preset" else "counters"

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
        # The class's own defaults where it lists them (SAC_REWARD's differ from PrefPPO's, and load()
        # rebuilds the object with them), the mixin's for a class that passes **kwargs on (RL2).
        mixin, own = inspect.signature(PreferenceRewardMixin.__init__), inspect.signature(cls.__init__)
        defaults = {**mixin.parameters, **own.parameters}
        given = [
            name for name in cls.model_only_arguments
            if name in arguments and name in defaults and arguments[name] != defaults[name].default
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

    def _segment_ends(self, dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray:
        """Where segments must not cross: episode ends (an algorithm playing several episodes as one may add its own)."""
        return dones


__all__ = [
    "PHASE_PREFERENCE",
    "PHASE_PRETRAIN",
    "PHASE_TRUE_REWARD",
    "PreferenceRewardMixin",
    "RolloutRecorder",
    "relabel_rollout",
]
