"""
The declarations of the preference options of ``PPO_REWARD``, ``SAC_REWARD`` and ``RL2``: one
:class:`PreferenceOption` per constructor argument (name, type, default, check, documentation line, the families that
take it, its learner argument and B-Pref flag), in :data:`PREFERENCE_OPTIONS`.

The table is data; the code that reads it is :mod:`sb3_pref.common.options` (the checks run on it, the signatures and
``:param`` lines made from it, the learner's arguments and B-Pref's flags taken from it). They are kept apart so that
the declarations read as one table, and a changed default or documentation line touches no code.
:mod:`sb3_pref.common.options` re-exports the public names of this module: import them from there.

Adding an option: declare it below, add it to the signature of each algorithm family it applies to
(``PPO_REWARD`` for on-policy, ``SAC_REWARD`` for off-policy), and use ``self.<name>`` where it acts (or give it a
``learner_arg``, and the learner receives it).
"""

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Optional, Union

from sb3_pref.common.reference_kl import ReferenceSource
from sb3_pref.common.validation import (
    check_count,
    check_feed_type,
    check_kl_coef,
    check_kl_horizon,
    check_kl_target,
    check_reference_source,
    check_reward_model,
    check_rune_beta,
    check_rune_decay,
    check_samples,
    check_schedule_option,
    check_teacher_option,
    check_unsuper_flag,
)
from sb3_pref.core.checks import check_bool, check_int, check_optional_int
from sb3_pref.core.feedback_plan import check_feedback_schedule
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.teachers import BaseTeacher

#: The algorithm families: an on-policy rollout (PPO_REWARD, RL2, A2C-style classes) or a replay buffer (SAC_REWARD).
ON_POLICY = "on_policy"
OFF_POLICY = "off_policy"
BOTH = (ON_POLICY, OFF_POLICY)

Check = Callable[[str, Any], Any]


def as_given(name: str, value: Any) -> Any:
    """No check: the value is stored as given."""
    return value


@dataclass(frozen=True)
class PreferenceOption:
    """
    One constructor argument of the preference algorithms.

    :param name: the argument's name, also the attribute it is stored in
    :param annotation: its type, as the signatures write it
    :param default: its default (on-policy algorithms, and off-policy ones unless ``off_policy_default`` is set)
    :param doc: its ``:param`` line
    :param check: ``(name, value) -> value``: raises for a bad value, returns it normalised (ints as ``int``, ...)
    :param families: the algorithm families whose signature has it; an off-policy algorithm refuses the others
        when given a value other than their default
    :param off_policy_default: the off-policy default where it differs (B-Pref's PEBBLE settings)
    :param model_only: only means something with a reward model: given without one, it is an error
    :param stored: kept as an attribute of that name (False: consumed by the set-up, e.g. ``size_segment``)
    :param learner_arg: the :class:`~sb3_pref.core.learner.PreferenceLearner` argument it is handed to
    :param bpref_flag: the B-Pref flag (``sb3_pref.experiments.flags``) that sets it in a B-Pref run
    """

    name: str
    annotation: Any
    default: Any
    doc: str
    check: Check = as_given
    families: tuple[str, ...] = BOTH
    off_policy_default: Any = inspect.Parameter.empty
    model_only: bool = False
    stored: bool = True
    learner_arg: Optional[str] = None
    bpref_flag: Optional[str] = None

    def default_for(self, family: str) -> Any:
        """:param family: ``ON_POLICY`` or ``OFF_POLICY``; :return: the default in that family's signature"""
        if family == OFF_POLICY and self.off_policy_default is not inspect.Parameter.empty:
            return self.off_policy_default
        return self.default


def _int(minimum: int, example: int) -> Check:
    return partial(check_int, minimum=minimum, example=example)


def _optional_int(minimum: int, example: int) -> Check:
    return partial(check_optional_int, minimum=minimum, example=example)


Option = PreferenceOption
# fmt: off
PREFERENCE_OPTIONS: tuple[PreferenceOption, ...] = (
    Option("reward_model", Optional[RewardModel], None, check=check_reward_model,
           doc="the learned reward; None trains on the env's reward (after optional pretraining)"),
    Option("reward_model_kwargs", Optional[dict[str, Any]], None,
           doc="keyword arguments of :class:`~sb3_pref.core.reward_model.RewardModel` without the spaces: the model "
               "is then built from the env's spaces (as SB3 builds the policy from ``policy_kwargs``), which config "
               "files (RL Zoo's YAML, Optuna) can express"),
    Option("teacher", Union[BaseTeacher, str, None], None, check=check_teacher_option, model_only=True,
           doc="who answers queries: a teacher object or a B-Pref preset name; None uses ``reward_model.teacher``"),
    Option("feedback_schedule", str, "auto", check=check_feedback_schedule,
           bpref_flag="feedback_schedule",
           doc="how the settings of when to ask that are left at None are chosen: ``\"auto\"`` (default) plans them "
               "from ``learn``'s ``total_timesteps`` and ``max_feed`` (pretraining a fifteenth of the run, a "
               "front-loaded first round, then small rounds until a third of the run; "
               ":mod:`~sb3_pref.core.feedback_plan`); ``\"bpref\"``: B-Pref's fixed values (32k pretraining steps, "
               "128 queries every 16k steps; PEBBLE: 9k, 128 every 5k). Values given explicitly are always kept. "
               "The plan in force is ``model.feedback_plan``"),
    Option("num_interaction", Optional[int], None, check=_optional_int(1, 16000), model_only=True,
           bpref_flag="re_num_interaction",
           doc="env steps (summed over envs) between query rounds; None: planned (``feedback_schedule``)"),
    Option("num_feed", int, 1, bpref_flag="re_num_feed",
           doc="accepted for B-Pref compatibility (it had no effect there either)"),
    Option("feed_type", Union[int, str, None], None, check=check_feed_type, model_only=True, learner_arg="feed_type",
           bpref_flag="re_feed_type",
           doc="query selection: 0-5 or a name (uniform, disagreement, entropy, kcenter, kcenter_disagreement, "
               "kcenter_entropy; see :data:`~sb3_pref.QUERY_METHODS`); None: ``\"disagreement\"`` with "
               "``feedback_schedule=\"auto\"`` (the setting every measured schedule of this library used), B-Pref's "
               "0 (uniform) with ``\"bpref\"``"),
    Option("re_update", Optional[int], None, check=_optional_int(1, 100), model_only=True, learner_arg="re_update",
           bpref_flag="re_update",
           doc="the most reward-model epochs per query round; None: planned (50 with ``feedback_schedule=\"auto\"``; "
               "B-Pref's 100, PEBBLE's 200)"),
    Option("metaworld_flag", bool, False, bpref_flag="metaworld",
           doc="accepted for B-Pref compatibility; success is logged whenever the env reports it"),
    Option("max_feed", int, 1400, check=_int(0, 1400), model_only=True, learner_arg="max_feed", bpref_flag="re_max_feed",
           doc="total feedback budget (queries asked, skipped ones included)"),
    Option("unsuper_step", Optional[int], None, check=_optional_int(0, 32000), bpref_flag="unsuper_step",
           doc="env steps of state-entropy pretraining (summed over envs); off-policy, after the ``learning_starts`` "
               "seed steps. None: planned (``feedback_schedule``)"),
    Option("unsuper_n_epochs", Optional[int], None, check=_optional_int(1, 50), families=(ON_POLICY,),
           bpref_flag="unsuper_n_epochs",
           doc="PPO epochs per update during pretraining; None keeps the algorithm's ``n_epochs``. B-Pref trains 50 "
               "epochs on each pretraining rollout (its scripts and grids pass 50): on SB3's usual 10 epochs that "
               "makes each pretraining update cost 5 normal ones. Ignored by algorithms without epochs (e.g. A2C)"),
    Option("unsuper_reset_policy", bool, False, check=check_bool, families=(ON_POLICY,),
           bpref_flag="unsuper_reset_policy",
           doc="when pretraining ends, put the policy (and its optimizer) back as it was before pretraining: the "
               "pretraining data still feed the first queries, but the policy does not start learning the task from "
               "the state-entropy policy's behaviour. False (default) keeps it, as B-Pref"),
    Option("size_segment", Optional[int], None, check=_optional_int(1, 50), model_only=True, stored=False,
           bpref_flag="re_segment", doc="segment length; overrides ``reward_model.size_segment`` when given"),
    Option("max_ep_len", Optional[int], None, check=_optional_int(1, 1000), learner_arg="max_ep_len",
           bpref_flag="max_ep_len", doc="episode length for the teacher's thresholds; None uses the observed mean"),
    Option("unsuper_flag", Optional[int], None, check=check_unsuper_flag,
           doc="default of ``learn(unsuper_flag=...)``: 1 pretraining then preferences, 2 pretraining then the true "
               "reward, 0 no pretraining; None: the class's ``default_unsuper_flag`` with a reward model (PrefPPO and "
               "PEBBLE: 1, RL2: 0), 0 without one"),
    Option("normalize_reward", bool, False, check=check_bool, model_only=True, learner_arg="normalize_rewards",
           doc="rescale predicted rewards to mean 0 / std 1 on recent transitions after each refit"),
    Option("anneal_reward_lr", bool, False, check=check_bool, model_only=True, learner_arg="anneal_lr",
           doc="decay the reward model's learning rate linearly to 0 over each round's gradient steps (all of them "
               "are run: no early stop)"),
    Option("segment_capacity", int, 100_000, check=_int(1, 100_000), model_only=True, learner_arg="segment_capacity",
           doc="transitions kept for drawing query segments"),
    Option("entropy_k", int, 5, check=_int(1, 5), doc="k of the k-NN state-entropy reward"),
    Option("reward_schedule", str, "auto", check=check_schedule_option, learner_arg="schedule", bpref_flag="re_schedule",
           doc="how much the reward model trains per round: ``\"auto\"`` (default; passes until the members' loss "
               "on held-out labels stops improving, at most ``re_update`` passes) or ``\"bpref\"`` (B-Pref's: up to "
               "``re_update`` passes over all labels); see :mod:`sb3_pref.core.reward_training`"),
    Option("reference_policy", ReferenceSource, None, check=check_reference_source, families=(ON_POLICY,),
           stored=False,
           doc="RLHF fine-tuning (docs/howto-finetune.md): penalise the learned reward per step by ``kl_coef * "
               "(log pi(a|s) - log pi_ref(a|s))`` before GAE. An SB3 policy or model, the path of a saved model, or "
               "``\"initial\"`` (a frozen copy of the policy when ``learn`` is first called); its weights are saved "
               "with this model. None: no penalty"),
    Option("kl_coef", float, 0.1, check=check_kl_coef, families=(ON_POLICY,),
           doc="the KL coefficient (the starting value when ``kl_target`` is set)"),
    Option("kl_target", Optional[float], None, check=check_kl_target, families=(ON_POLICY,),
           doc="adapt ``kl_coef`` towards this mean KL per env step (the RLHF document's controller); None keeps it "
               "fixed"),
    Option("kl_horizon", int, 10_000, check=check_kl_horizon, families=(ON_POLICY,),
           doc="env steps (summed over envs) of the adaptive controller's horizon"),
    Option("normalize_reward_before", bool, False, learner_arg="normalize_before",
           doc="fit the reward's gain/bias before each refit as well (RLHF ``normalize_before``)"),
    Option("normalize_reward_samples", str, "recent", check=check_samples, families=(ON_POLICY,),
           doc="what the gain/bias are fitted on: ``\"recent\"`` transitions, or ``\"reference\"``: the latest "
               "rollout's states with actions drawn from the reference policy"),
    Option("whiten_reward", bool, False, families=(ON_POLICY,),
           doc="divide each rollout's rewards by their std, keeping their mean (after the KL penalty)"),
    Option("zero_value_head", bool, False, families=(ON_POLICY,),
           doc="value head weights and bias at 0 when training starts and whenever it is reset"),
    Option("anneal_policy_lr", bool, False,
           doc="the policy's learning rate (off-policy: the actor's, critic's and entropy coefficient's) decays "
               "linearly to 0 over each ``learn`` call"),
    Option("n_eval_pairs", int, 256, check=_int(0, 256), learner_arg="n_eval_pairs",
           doc="fresh segment pairs on which each round measures the reward model's agreement with a perfectly "
               "rational teacher (``reward/true_pref_accuracy``); more measure it more precisely, 0 skips it (it "
               "costs a reward-model pass over the pairs, drawn with the learner's generator)"),
    Option("first_round_uniform", bool, True, learner_arg="first_round_uniform",
           doc="the first query round draws its pairs uniformly, whatever ``feed_type`` is (B-Pref; with pretraining it "
               "is the round that ends it); False: ``feed_type`` from the first round on"),
    Option("rime", bool, False, check=check_bool, model_only=True, learner_arg="rime", bpref_flag="rime",
           doc="RIME's robust training for noisy teachers (Cheng et al. 2024; :mod:`~sb3_pref.core.rime`): before "
               "each round, train only on the labels the ensemble finds plausible and flip those it finds very "
               "implausible (the stored labels are kept). Logged as ``reward/rime_trusted`` and ``rime_flipped``"),
    Option("rune_beta", float, 0.0, check=check_rune_beta, model_only=True, learner_arg="rune_beta",
           bpref_flag="rune_beta",
           doc="RUNE's exploration bonus (Liang et al. 2022): the policy's reward is the ensemble's mean plus "
               "``beta_t`` times its std over members, ``beta_t = rune_beta * (1 - rune_decay) ** num_timesteps``. "
               "0 (default) turns it off; RUNE used 0.05 with PEBBLE and a constant 0.01 with PrefPPO. The logged "
               "agreement with the true reward is the mean's, without the bonus"),
    Option("rune_decay", float, 0.0, check=check_rune_decay, model_only=True, learner_arg="rune_decay",
           bpref_flag="rune_decay",
           doc="RUNE's decay of ``beta_t`` per env step (1e-5 with PEBBLE); 0 keeps it constant"),
    Option("surf", bool, False, check=check_bool, model_only=True, learner_arg="surf", bpref_flag="surf",
           doc="SURF's semi-supervised reward learning (Park et al. 2022; :mod:`~sb3_pref.core.surf`): each round also "
               "draws unlabelled pairs (100 per query, at most 4096) and every member learns from those it is at least "
               "99% sure about, on temporal crops; about 5x the reward model's training cost. Logged as "
               "``reward/surf_confident``, and how many of those pseudo-labels the true returns agree with as "
               "``reward/surf_pseudo_agreement``"),
    Option("qpa_episodes", int, 0, check=_int(0, 10), model_only=True, learner_arg="qpa_episodes",
           bpref_flag="qpa_episodes",
           doc="QPA's policy-aligned queries (Hu et al. 2024): each round draws its pairs from the last "
               "``qpa_episodes`` episodes only, the behaviour the policy has now (QPA: 10 on DMC), uniformly when "
               "``feed_type`` is left unset; off-policy algorithms also draw half of each batch from those "
               "episodes while labels remain (QPA's hybrid replay). 0 (default): queries from every stored episode"),
    Option("qpa_crops", int, 0, check=_int(0, 20), model_only=True, learner_arg="qpa_crops", bpref_flag="qpa_crops",
           doc="QPA's data augmentation (Hu et al. 2024; :mod:`~sb3_pref.core.qpa`): the reward model's loss counts each "
               "labelled pair this many times, each on random crops of 70-90% of its two segments (QPA: 20, with "
               "``qpa_episodes``); 0 (default): each pair once, whole. Works on- and off-policy"),
    Option("reset_critic", bool, True, families=(OFF_POLICY,),
           doc="reset the critic (both Q-networks, their targets, the critic's optimizer) when pretraining ends "
               "(PEBBLE), then take ``reset_update`` extra gradient steps; False keeps the critic trained on the "
               "entropy reward"),
    Option("rime_warm_start", bool, False, check=check_bool, model_only=True, families=(OFF_POLICY,),
           doc="RIME's warm start (Cheng et al. 2024): while pretraining, every SAC gradient step is followed by 5 "
               "steps that regress each reward-model member (MSE) onto the state-entropy reward of a replay batch, "
               "standardised and scaled into [-1, 1], so the first labels refine a reward the critic already "
               "learned from; RIME also keeps the critic (``reset_critic=False``). Logged as "
               "``reward/warm_start_loss``"),
    Option("reset_update", int, 100, check=partial(check_count, minimum=0), families=(OFF_POLICY,),
           doc="extra gradient steps right after the critic reset that ends pretraining (B-Pref: 100)"),
    Option("relabel_chunk_size", int, 16384, check=partial(check_count, minimum=1), families=(OFF_POLICY,),
           doc="transitions per reward-model pass when relabelling the replay buffer"),
)
# fmt: on
OPTIONS_BY_NAME: dict[str, PreferenceOption] = {option.name: option for option in PREFERENCE_OPTIONS}


__all__ = ["BOTH", "OFF_POLICY", "ON_POLICY", "OPTIONS_BY_NAME", "PREFERENCE_OPTIONS", "Check", "PreferenceOption", "as_given"]
