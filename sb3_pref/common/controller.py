"""
The preference controller: what happens in each rollout of a preference-learning SB3 algorithm, on-policy or
off-policy. It owns the phase (state-entropy pretraining, learning from preferences, or the env's own reward) and
its counters, the :class:`~sb3_pref.core.learner.PreferenceLearner`, the pretraining's
:class:`~sb3_pref.core.entropy.StateEntropyReward`, the query rounds and the state saved with the model.

It reaches the algorithm through :class:`PreferenceHost` (a few SB3 members and the options the algorithm stores),
and the algorithm's buffer through a :class:`RewardWriter`, one per buffer kind: the rollout buffer's
(:class:`~sb3_pref.common.rollout_writer.RolloutRewardWriter`) or the replay buffer's
(:class:`~sb3_pref.common.offpolicy.ReplayRewardWriter`). The algorithm holds one controller (``preference``) and
one writer, and hands each finished rollout to :meth:`PreferenceController.finish_rollout`. Both interfaces are
declared in :mod:`sb3_pref.common.controller_interfaces` and re-exported here.
"""

import warnings
from typing import Any, Callable, Optional, Union

import numpy as np
import torch as th

from sb3_pref.common.controller_interfaces import PreferenceHost, RewardWriter
from sb3_pref.core.checks import user_stacklevel
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.feedback_plan import FeedbackPlan
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.state import to_numpy_state, to_torch_state
from sb3_pref.core.teachers import BaseTeacher, ScriptedTeacher

#: The controller's phases, logged as ``reward/phase``.
PHASE_PRETRAIN, PHASE_PREFERENCE, PHASE_TRUE_REWARD = 0, 1, 2

#: ``learn`` warns when pretraining would take more than this share of the steps it is asked for.
PRETRAIN_WARN_SHARE = 0.25


class PreferenceController:
    """
    The phases and the preference learning of one algorithm (see the module docstring).

    :param host: the algorithm
    :param writer: its buffer kind's reward writer
    """

    #: the progress saved in SB3's data file, by the names of the algorithm attributes that held it before
    SAVED_NAMES = ("_num_interactions", "_unsuper_steps_done", "_pretrain_done", "_rollout_phase", "_feedback_plan")

    def __init__(self, host: PreferenceHost, writer: RewardWriter) -> None:
        self.host = host
        self.writer = writer
        self.learner: Optional[PreferenceLearner] = None
        self.entropy_reward: Optional[StateEntropyReward] = None
        # Progress that must survive save/load (plain values, stored in SB3's data file).
        self.num_interactions = 0
        self.unsuper_steps_done = 0
        self.pretrain_done = False
        self.rollout_phase = PHASE_TRUE_REWARD
        #: when pretraining ends and the rounds run (made by each ``learn`` call, see :meth:`apply_plan`)
        self.plan: Optional[FeedbackPlan] = None
        self._plan_unlogged = False
        self._long_rollout_told = False
        # The policy as pretraining found it, while pretraining runs with unsuper_reset_policy (saved in pref_state).
        self.policy_before_pretraining: Optional[dict[str, th.Tensor]] = None

    # ------------------------------------------------------------------ set-up
    def setup_learner(
        self,
        model: RewardModel,
        teacher: BaseTeacher,
        n_envs: int,
        seed: Optional[int],
        given_at_load: Union[bool, str],
        normalization_sampler: Optional[Callable[[], np.ndarray]],
        options: dict[str, Any],
    ) -> PreferenceLearner:
        """
        Build the learner (on creation and on load, before the saved state arrives).

        :param model: the reward model, checked against the env
        :param teacher: the teacher that answers (the caller's, or the reward model's)
        :param n_envs: the algorithm's envs
        :param seed: the algorithm's seed: an unseeded untrained model and an unseeded fresh teacher follow it
        :param given_at_load: False, or how a teacher was given to ``load()`` (``"preset"``, ``"object"``)
        :param normalization_sampler: the samples the reward's gain/bias are fitted on (None: recent transitions)
        :param options: the learner's options, as the algorithm stores them
        """
        if seed is not None and model.n_updates == 0 and model.seed is None:
            # An untrained model (or a fresh teacher) passed in without a seed follows the algorithm's
            # seed, so that the same seed gives the same run.
            model.reset_parameters(seed)
        if not given_at_load and seed is not None and isinstance(teacher, ScriptedTeacher) and teacher.seed is None:
            if teacher.counters["asked"] == 0:
                teacher.reseed(seed)
        learner = self.learner = PreferenceLearner(
            model, n_envs=n_envs, teacher=teacher, normalization_sampler=normalization_sampler, seed=seed, **options
        )
        if self.plan is not None:
            learner.follow_plan(self.plan)
        if given_at_load:
            # By preset name: our own new object, which continues the saved counters and label stream
            # under the settings asked for. An object: the caller's settings and generator are kept, and
            # the run's counters and bookkeeping continue in it (a human teacher must know which answers
            # the saved dataset already holds, or it would hand them over twice).
            learner.restore_teacher = "progress" if given_at_load == "preset" else "counters"
        return learner

    # ------------------------------------------------------------------ learn
    def apply_plan(self, plan: FeedbackPlan, continued: bool) -> None:
        """
        A ``learn`` call starts with this plan: the learner follows it, and the user is told what it is, and
        whether the labels asked for fit in the steps.

        :param plan: the plan of this call
        :param continued: the plan continues the previous call's (``reset_num_timesteps=False``)
        """
        self.plan = plan
        self._plan_unlogged = True
        self._long_rollout_told = False
        learner = self.learner
        if learner is None:
            return
        learner.follow_plan(plan)
        start = self.host.num_timesteps if continued else 0
        first_done = learner.n_rounds > 0
        text = plan.describe(start=start, first_done=first_done, budget=learner.budget_left)
        if self.host.verbose >= 1:
            print(("Continuing the " if continued else "") + text)
        asked = sum(n for _, n in plan.rounds(start=start, first_done=first_done, budget=learner.budget_left))
        # A continued plan goes on at its own rate: a run resumed in pieces is told once, by the call that planned it.
        if asked < learner.budget_left and not continued:
            warnings.warn(
                f"only {asked} of the {learner.budget_left} labels left (max_feed={learner.max_feed}) can be asked in "
                f"this learn call's {plan.total_timesteps} steps: {text}. Raise total_timesteps, lower max_feed, or ask "
                "more often (num_interaction) or more per round (the reward model's mb_size)",
                stacklevel=user_stacklevel(),
            )

    def warn_if_pretraining_dominates(self, total_timesteps: int) -> None:
        """Tell the user when the ``unsuper_step`` they gave would take a large share of this ``learn`` call."""
        host = self.host
        if host.unsuper_flag not in (1, 2) or self.pretrain_done or self.plan is None:
            return
        if "unsuper_step" not in self.plan.given:
            return  # a planned length is a fixed share of the run
        left = self.plan.unsuper_step - self.unsuper_steps_done
        if left > PRETRAIN_WARN_SHARE * total_timesteps:
            warnings.warn(
                f"state-entropy pretraining takes {left} of this run's {total_timesteps} env steps "
                f"({left / total_timesteps:.0%}): the policy learns nothing about the task meanwhile, and its "
                "pretrained behaviour must be unlearned afterwards. Lower unsuper_step (e.g. "
                f"unsuper_step={int(0.1 * total_timesteps)}) or skip pretraining with learn(..., unsuper_flag=0)",
                stacklevel=user_stacklevel(),
            )

    # ------------------------------------------------------------------ phases
    def pretraining(self) -> bool:
        """Whether the next rollout is a pretraining one (the seed steps count towards pretraining)."""
        host = self.host
        return (
            host.unsuper_flag in (1, 2)
            and not self.pretrain_done
            and self.unsuper_steps_done < self.writer.seed_steps + self.unsuper_step
        )

    @property
    def unsuper_step(self) -> int:
        """Env steps of pretraining in force (the plan's; before any ``learn`` call, the option's or 0)."""
        if self.plan is not None:
            return self.plan.unsuper_step
        return getattr(self.host, "unsuper_step", None) or 0

    def begin_rollout(self) -> None:
        """A rollout starts: decide its phase (and keep the policy when pretraining is about to change it)."""
        host = self.host
        pretraining = self.pretraining()
        if not pretraining and host.num_timesteps < self.writer.seed_steps and not self.pretrain_done:
            # Seed steps without pretraining: random actions, no gradient step, so no reward to learn yet.
            self.rollout_phase = PHASE_TRUE_REWARD
            return
        if pretraining:
            # An on-policy option: off-policy algorithms do not take it (PEBBLE resets the critic instead).
            if getattr(host, "unsuper_reset_policy", False) and self.unsuper_steps_done == 0:
                # A copy, not a reference: the state dict's tensors are the live parameters.
                self.policy_before_pretraining = {
                    name: tensor.detach().clone() for name, tensor in host.policy.state_dict().items()
                }
            self.rollout_phase = PHASE_PRETRAIN
            return
        if host.unsuper_flag in (1, 2) and not self.pretrain_done:
            self.end_pretraining()
        use_preferences = self.learner is not None and host.unsuper_flag != 2
        self.rollout_phase = PHASE_PREFERENCE if use_preferences else PHASE_TRUE_REWARD

    def end_pretraining(self) -> None:
        """Pretraining is over: the first query round, and the policy back (or its value head reset)."""
        host = self.host
        self.pretrain_done = True
        self.entropy_reward = None
        if host.unsuper_flag == 1 and self.learner is not None and len(self.learner.store) > 0:
            self.log_round(self.learner.query_round())  # the first round: uniform unless first_round_uniform=False
        self.num_interactions = 0
        if self.policy_before_pretraining is not None:
            # The value head comes back untrained as well, so no reset is needed after this.
            host.policy.load_state_dict(self.policy_before_pretraining)
            host.policy.optimizer.state.clear()
            self.policy_before_pretraining = None
        else:
            self.writer.reset_value_head()

    def segment_info_keys(self) -> tuple[str, ...]:
        """``info`` keys recorded with every transition: what the teacher needs to show a segment."""
        teacher = self.learner.teacher if self.learner is not None else None
        return tuple(getattr(teacher, "required_info_keys", ()))

    def finish_rollout(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        true: np.ndarray,
        seen: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        """
        A rollout is complete (see :meth:`~sb3_pref.common.rollout.RolloutHost._finish_rollout` for the arrays):
        the learner gets its transitions, a query round runs when one is due, and the writer puts the rewards.
        """
        self.writer.rollout_complete(obs)
        n_transitions = true.size
        learner, logger = self.learner, self.host.logger
        if learner is not None:
            learner.add_transitions(obs, actions, true, dones, extras=extras)
        if self.rollout_phase == PHASE_PRETRAIN:
            self.unsuper_steps_done += n_transitions
            if self.entropy_reward is None:
                capacity = self.writer.entropy_capacity(n_transitions, self.unsuper_step)
                self.entropy_reward = StateEntropyReward(obs.shape[-1], capacity=capacity, k=self.host.entropy_k)
            self.writer.pretrain_rollout(self.entropy_reward, obs, seen)
        elif self.rollout_phase == PHASE_PREFERENCE:
            assert learner is not None, "the preference phase exists only with a reward model"
            self.num_interactions += n_transitions
            assert self.plan is not None, "learn() plans the feedback before the first rollout"
            if n_transitions > self.plan.rollout_steps and not self._long_rollout_told and learner.budget_left > 0:
                self._warn_long_rollout(n_transitions)
            due = learner.n_rounds == 0 or self.num_interactions >= self.plan.num_interaction
            # Past the budget a round can still bring a teacher's late labels (query_round returns {} otherwise).
            if due:
                self.log_round(learner.query_round())
                self.num_interactions = 0
            predicted, bonus = learner.predict_rewards_and_bonus(obs, actions, self.host.num_timesteps)
            if bonus is None:
                self.writer.write_rewards(predicted, seen)
            else:  # RUNE: the policy explores where the members disagree; the logged agreement is the mean's
                self.writer.write_rewards(predicted + bonus, seen)
                logger.record("reward/rune_beta", learner.rune_weight(self.host.num_timesteps))
                logger.record("reward/rune_bonus", float(bonus.mean()))
            if predicted.std() > 0 and true.std() > 0:
                logger.record("reward/pred_true_corr", float(np.corrcoef(predicted.ravel(), true.ravel())[0, 1]))
        logger.record("reward/phase", self.rollout_phase)
        if self._plan_unlogged and self.plan is not None:
            # Once per learn call: the plan's numbers, beside the counters they explain.
            self._plan_unlogged = False
            for key in ("unsuper_step", "num_interaction", "first_round", "round_size", "re_update"):
                logger.record(f"reward/plan_{key}", getattr(self.plan, key))
        if learner is not None:
            for key, value in learner.counters().items():
                logger.record(f"reward/{key}", value)

    def _warn_long_rollout(self, n_transitions: int) -> None:
        """Once per ``learn`` call: a rollout outlasted the plan's, and at most one round runs per rollout."""
        assert self.plan is not None
        self._long_rollout_told = True
        warnings.warn(
            f"a rollout of {n_transitions} env steps is longer than the {self.plan.rollout_steps} the feedback plan "
            f"counted on: at most one query round runs per rollout, so the rounds planned every "
            f"{self.plan.num_interaction} steps come later than planned and the last labels may go unasked. With a "
            "train_freq in episodes, give the env its time limit (gymnasium.wrappers.TimeLimit) or use a train_freq "
            "in steps; with more envs than the plan was made for, plan afresh (learn(..., reset_num_timesteps=True)) "
            "or set num_interaction to a whole number of rollouts",
            stacklevel=user_stacklevel(),
        )

    def log_round(self, stats: dict[str, float]) -> None:
        """:param stats: a query round's statistics, logged under ``reward/``"""
        for key, value in stats.items():
            self.host.logger.record(f"reward/{key}", value)

    # ------------------------------------------------------------------ saved state
    def saved_values(self) -> dict[str, Any]:
        """The progress and the writer's plain values, saved in SB3's data file under their historical names."""
        plan = self.plan.to_dict() if self.plan is not None else None
        progress = (self.num_interactions, self.unsuper_steps_done, self.pretrain_done, self.rollout_phase, plan)
        return {**dict(zip(self.SAVED_NAMES, progress)), **self.writer.saved_values()}

    def load_saved_values(self, values: dict[str, Any]) -> None:
        """:param values: what SB3's load found under the names of :meth:`saved_values` (all of them optional)"""
        self.num_interactions = values.get("_num_interactions", self.num_interactions)
        self.unsuper_steps_done = values.get("_unsuper_steps_done", self.unsuper_steps_done)
        self.pretrain_done = values.get("_pretrain_done", self.pretrain_done)
        self.rollout_phase = values.get("_rollout_phase", self.rollout_phase)
        plan = values.get("_feedback_plan")
        self.plan = FeedbackPlan.from_dict(plan) if plan is not None else None
        self.writer.load_saved_values(values)

    def state_dict(self) -> dict[str, Any]:
        """What SB3 saves as ``pref_state``: labels, segments, budget, teacher and pretraining buffer."""
        assert self.learner is not None, "pref_state is saved only with a reward model"
        state: dict[str, Any] = {"learner": self.learner.state_dict()}
        if self.entropy_reward is not None:
            state["entropy"] = to_torch_state(self.entropy_reward.state_dict())
            state["entropy_config"] = {"obs_dim": self.entropy_reward.obs_dim, "capacity": self.entropy_reward.capacity}
        if self.policy_before_pretraining is not None:
            state["policy_before_pretraining"] = self.policy_before_pretraining
        return state

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """:param state: what :meth:`state_dict` returned; :param strict: unused (the ``nn.Module`` signature)"""
        assert self.learner is not None, "pref_state is loaded only with a reward model"
        self.learner.load_state_dict(state["learner"])
        if "entropy" in state:
            config = state["entropy_config"]
            self.entropy_reward = StateEntropyReward(
                int(config["obs_dim"]), capacity=int(config["capacity"]), k=self.host.entropy_k
            )
            self.entropy_reward.load_state_dict(to_numpy_state(state["entropy"]))
        if "policy_before_pretraining" in state:
            device = self.host.policy.device
            self.policy_before_pretraining = {
                name: tensor.to(device) for name, tensor in state["policy_before_pretraining"].items()
            }


__all__ = ["PRETRAIN_WARN_SHARE", "PreferenceController", "PreferenceHost", "RewardWriter"]
