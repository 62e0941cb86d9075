"""
When a preference-learning run asks for labels, planned from the run's own budget.

A user who swaps ``PPO`` for ``PPO_REWARD`` gives a label budget (``max_feed``) and a number of env steps
(``learn(total_timesteps)``). B-Pref's fixed schedule (32k steps of state-entropy pretraining, then 128 queries every
16k steps) was made for 4M-step runs: at 120k steps it spends a quarter of the run pretraining and asks most labels
after the policy has settled. :func:`plan_feedback` instead scales the shape that ``benchmarks/demo/README.md`` and
``benchmarks/quality_grid/README.md`` measured best at SB3's usual budgets:

- **pretraining**: a fifteenth of the run (at most :data:`PRETRAIN_CAP` steps), in whole rollouts;
- **a front-loaded first round**: a quarter to a half of the labels (about :data:`FIRST_ROUND_TARGET`), drawn from
  the pretraining's diverse states, so the first reward the policy trains on is fitted on many labels;
- **then small rounds, often**: the rest in :data:`ROUNDS_AFTER_FIRST` equal rounds, every label asked by a third
  of the run (:data:`LABEL_WINDOW`), so whatever the policy starts to exploit is labelled soon and the reward has
  stopped moving well before the run ends.

At the README demo's budget (120k steps of 8 x 250-step rollouts, 400 labels) this is exactly the demo's hand-set
schedule: 8k steps of pretraining, 200 labels, then 25 every 4k steps until 40k.

Anything the user set explicitly is kept as given, and the rest is planned around it (a round size the user gives,
the reward model's ``mb_size``, is also the first round's unless ``initial_mb_size`` is given, as without a plan).
``feedback_schedule="bpref"`` gives B-Pref's fixed values instead (its scripts and its call shape use it), so B-Pref's
results stay reproducible.
The plan is made by the first ``learn`` call and saved with the model; a later ``learn(...,
reset_num_timesteps=False)`` continues it round for round, so a resumed run asks what the uninterrupted one would.
"""

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional

#: the feedback schedules: planned from the budget, or B-Pref's fixed values
FEEDBACK_SCHEDULES = ("auto", "bpref")

#: share of ``total_timesteps`` spent on state-entropy pretraining, and its cap in env steps
PRETRAIN_SHARE = 1 / 15
PRETRAIN_CAP = 10_000
#: the first round's size: this many labels, kept between a quarter and a half of the budget
FIRST_ROUND_TARGET = 200
#: every label is asked by this share of ``total_timesteps``
LABEL_WINDOW = 1 / 3
#: equal rounds that follow the first one
ROUNDS_AFTER_FIRST = 8
#: the most reward-model passes per round (with the held-out early stop, ``reward_schedule="auto"``)
AUTO_RE_UPDATE = 50

#: the schedule settings a plan resolves: the algorithm's options, then the round sizes
SCHEDULE_SETTINGS = ("unsuper_step", "num_interaction", "re_update", "first_round", "round_size")

#: B-Pref's fixed values, per algorithm family (PrefPPO's scripts; PEBBLE's); the first round is ``round_size``
BPREF_SCHEDULE: dict[str, dict[str, int]] = {
    "on_policy": {"unsuper_step": 32_000, "num_interaction": 16_000, "re_update": 100, "round_size": 128},
    "off_policy": {"unsuper_step": 9_000, "num_interaction": 5_000, "re_update": 200, "round_size": 128},
}


def default_feed_type(schedule: str) -> str:
    """
    The query selection of a run that does not choose one: disagreement with the planned schedule (every schedule
    this library measured used it; uniform queries left cartpole_balance at 384 on a fresh seed where disagreement
    reached 1000, ``benchmarks/defaults/``), B-Pref's uniform draws with its own.

    :param schedule: ``"auto"`` or ``"bpref"``
    """
    return "disagreement" if schedule == "auto" else "uniform"


def check_feedback_schedule(name: str, value: Any) -> str:
    """:param name: the option's name; :param value: ``"auto"`` or ``"bpref"``; :return: the value"""
    if value not in FEEDBACK_SCHEDULES:
        raise ValueError(
            f"{name} must be 'auto' (planned from learn()'s total_timesteps and max_feed) or 'bpref' (B-Pref's fixed "
            f"32k pretraining steps and 128 queries every 16k steps), got {value!r}"
        )
    return str(value)


@dataclass(frozen=True)
class FeedbackPlan:
    """
    The schedule in force: when pretraining ends, how many labels each round asks, and how often.

    :param schedule: ``"auto"`` or ``"bpref"``
    :param total_timesteps: env steps of the ``learn`` call it was planned for
    :param max_feed: the label budget it was planned for (the labels left, when planned after some were asked)
    :param rollout_steps: env steps between two chances to ask (a rollout, summed over envs)
    :param unsuper_step: env steps of state-entropy pretraining
    :param num_interaction: env steps between query rounds
    :param re_update: the most reward-model passes per round
    :param first_round: queries of the first round
    :param round_size: queries of each later round
    :param given: the settings the user gave (kept as given); the others were planned
    :param pretraining: whether the run pretrains before the first round
    :param seed_steps: env steps before pretraining and before any round (SAC's ``learning_starts``: random actions);
        they move the rounds, not the planned values
    """

    schedule: str
    total_timesteps: int
    max_feed: int
    rollout_steps: int
    unsuper_step: int
    num_interaction: int
    re_update: int
    first_round: int
    round_size: int
    given: tuple[str, ...] = field(default=())
    pretraining: bool = True
    seed_steps: int = 0

    def rounds(self, start: int = 0, first_done: bool = False, budget: Optional[int] = None) -> list[tuple[int, int]]:
        """
        The query rounds this plan asks within its ``total_timesteps``, as the controller runs them.

        :param start: env steps already taken (a continued run)
        :param first_done: the first round was already asked
        :param budget: labels left (default: the plan's ``max_feed``)
        :return: ``(env step, queries)`` per round, until the budget or the steps run out
        """
        left = self.max_feed if budget is None else budget
        rollout = self.rollout_steps
        end = start + _round_up(self.total_timesteps, rollout)  # SB3 runs whole rollouts until it has the steps
        if first_done:
            step = start + _round_up(self.num_interaction, rollout)
        elif self.pretraining:  # pretraining covers the seed steps, then its own
            step = max(start, _round_up(self.seed_steps + self.unsuper_step, rollout))
        else:  # the first preference rollout after the seed steps asks
            step = max(start, _round_up(self.seed_steps, rollout) if self.seed_steps else 0) + rollout
        if self.pretraining and not first_done and step >= end:
            # The round that ends pretraining is asked when the next rollout starts: a call that ends with its
            # pretraining asks no label (a continued call asks that round first).
            return []
        out: list[tuple[int, int]] = []
        size = self.round_size if first_done else self.first_round
        while left > 0 and step <= end:
            asked = min(size, left)
            out.append((step, asked))
            left -= asked
            size = self.round_size
            step += _round_up(self.num_interaction, rollout)
        return out

    def describe(self, start: int = 0, first_done: bool = False, budget: Optional[int] = None) -> str:
        """One line for the log: pretraining, the rounds, and when the last label is asked."""
        rounds = self.rounds(start, first_done, budget)
        asked = sum(n for _, n in rounds)
        left = self.max_feed if budget is None else budget
        pretrain = f"{self.unsuper_step} steps of pretraining, " if self.pretraining and not first_done else ""
        if self.seed_steps > start and not first_done:
            pretrain = f"{self.seed_steps} seed steps (learning_starts), " + pretrain
        if not rounds and left <= 0:
            return f"feedback plan ({self.schedule}): {pretrain}no label left to ask (the budget is spent)"
        if not rounds:
            return f"feedback plan ({self.schedule}): {pretrain}no query round within {self.total_timesteps} steps"
        first = "" if first_done else f"{rounds[0][1]} queries at step {rounds[0][0]}, then "
        return (
            f"feedback plan ({self.schedule}): {pretrain}{first}{self.round_size} every {self.num_interaction} steps; "
            f"{asked} of {left} labels asked by step {rounds[-1][0]} of {start + self.total_timesteps} "
            f"({len(rounds)} round{'s' if len(rounds) > 1 else ''}, at most {self.re_update} reward-model passes each)"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain values, saved in SB3's data file."""
        values = asdict(self)
        values["given"] = list(self.given)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "FeedbackPlan":
        """:param values: what :meth:`to_dict` returned"""
        return cls(**{**values, "given": tuple(values.get("given", ()))})


def _round_up(steps: float, rollout: int) -> int:
    """Whole rollouts covering ``steps`` (at least one)."""
    return max(1, math.ceil(round(steps) / rollout)) * rollout


def _round_near(steps: float, rollout: int) -> int:
    """The nearest whole number of rollouts to ``steps`` (at least one)."""
    return max(1, round(steps / rollout)) * rollout


def plan_feedback(
    schedule: str,
    family: str,
    total_timesteps: int,
    max_feed: int,
    rollout_steps: int,
    given: dict[str, Optional[int]],
    pretraining: bool = True,
    first_done: bool = False,
    seed_steps: int = 0,
) -> FeedbackPlan:
    """
    Plan the feedback of one ``learn`` call.

    :param schedule: ``"auto"`` (from the budget) or ``"bpref"`` (B-Pref's fixed values)
    :param family: ``"on_policy"`` or ``"off_policy"`` (B-Pref's values differ)
    :param total_timesteps: the env steps of this ``learn`` call
    :param max_feed: the labels left to ask
    :param rollout_steps: env steps between two chances to ask (``n_steps * n_envs``; off-policy ``train_freq * n_envs``)
    :param given: the user's value of each of :data:`SCHEDULE_SETTINGS` (None: plan it)
    :param pretraining: the run pretrains before its first round
    :param first_done: the first round was already asked (a run planned after some labels)
    :param seed_steps: env steps before pretraining and the rounds (SAC's ``learning_starts``); the planned values do
        not change with them, the rounds' steps do
    :return: the plan
    """
    check_feedback_schedule("feedback_schedule", schedule)
    given_names = tuple(name for name in SCHEDULE_SETTINGS if given.get(name) is not None)
    values: dict[str, int] = {name: int(given[name]) for name in given_names}  # type: ignore[arg-type]
    rollout = max(1, int(rollout_steps))
    if schedule == "bpref":
        for name, value in BPREF_SCHEDULE[family].items():
            values.setdefault(name, value)
        values.setdefault("first_round", values["round_size"])
    else:
        values.setdefault("re_update", AUTO_RE_UPDATE)
        values.setdefault("unsuper_step", _round_near(min(PRETRAIN_SHARE * total_timesteps, PRETRAIN_CAP), rollout))
        if first_done:
            values.setdefault("first_round", 0)
        elif "round_size" in values:
            # A round size the user gave is the first round's too (RewardModel's initial_mb_size=None, as before).
            values.setdefault("first_round", values["round_size"])
        else:
            target = max(max_feed // 4, min(FIRST_ROUND_TARGET, max_feed // 2))
            values.setdefault("first_round", max(1, min(target, max_feed)))
        start = values["unsuper_step"] if pretraining and not first_done else 0
        window = max(LABEL_WINDOW * total_timesteps - start, rollout)
        rest = max(max_feed - values["first_round"], 0)
        if "num_interaction" in values and "round_size" not in values:
            n_rounds = max(1, int(window // values["num_interaction"]))
            values["round_size"] = max(1, math.ceil(rest / n_rounds))
        elif "round_size" in values and "num_interaction" not in values:
            n_rounds = max(1, math.ceil(rest / values["round_size"]))
            values["num_interaction"] = _round_near(window / n_rounds, rollout)
        elif "round_size" not in values:
            # As many rounds as fit in the window, one rollout apart at most: a short run asks more per round.
            n_rounds = min(ROUNDS_AFTER_FIRST, max(1, int(window // rollout)))
            values["num_interaction"] = _round_near(window / n_rounds, rollout)
            values["round_size"] = max(1, math.ceil(rest / n_rounds))
    plan = FeedbackPlan(
        schedule=schedule,
        total_timesteps=int(total_timesteps),
        max_feed=int(max_feed),
        rollout_steps=rollout,
        given=given_names,
        pretraining=pretraining,
        seed_steps=max(0, int(seed_steps)),
        **{name: values[name] for name in SCHEDULE_SETTINGS},
    )
    if schedule == "auto" and not {"round_size", "num_interaction"} & set(given_names):
        # Too short a run for the rounds (a few long rollouts): fewer, larger rounds, down to one that asks all.
        while sum(n for _, n in plan.rounds(first_done=first_done)) < max_feed and plan.round_size < max_feed:
            n_rounds = sum(1 for _ in plan.rounds(first_done=first_done)) - (0 if first_done else 1)
            if n_rounds >= 1:
                plan = replace(plan, round_size=max(1, math.ceil((max_feed - plan.first_round) / n_rounds)))
            elif not first_done and "first_round" not in given_names:
                plan = replace(plan, first_round=max_feed, round_size=max_feed)
            else:
                break
    return plan


def continue_plan(plan: FeedbackPlan, total_timesteps: int, budget: int, given: dict[str, Optional[int]]) -> FeedbackPlan:
    """
    The plan of a continued run (``learn(..., reset_num_timesteps=False)``): the same rounds at the same rate, over
    this call's steps; values the user has set since are taken as given.

    :param plan: the plan in force
    :param total_timesteps: the env steps of this ``learn`` call
    :param budget: the labels left
    :param given: the user's current values of :data:`SCHEDULE_SETTINGS` (None: keep the plan's)
    """
    changed: dict[str, Any] = {
        name: int(value) for name, value in given.items() if value is not None and name in SCHEDULE_SETTINGS
    }
    names = tuple(sorted(set(plan.given) | set(changed), key=SCHEDULE_SETTINGS.index))
    return replace(plan, **changed, total_timesteps=int(total_timesteps), max_feed=int(budget), given=names)


__all__ = [
    "AUTO_RE_UPDATE",
    "BPREF_SCHEDULE",
    "FEEDBACK_SCHEDULES",
    "FIRST_ROUND_TARGET",
    "LABEL_WINDOW",
    "PRETRAIN_CAP",
    "PRETRAIN_SHARE",
    "ROUNDS_AFTER_FIRST",
    "SCHEDULE_SETTINGS",
    "FeedbackPlan",
    "check_feedback_schedule",
    "continue_plan",
    "default_feed_type",
    "plan_feedback",
]
