"""An SB3 callback that shows training progress on the labelling page and logs the person's answers."""

import math
import time
from collections import deque
from typing import Any, Callable, Optional

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

#: Finished episodes averaged into each point of the page's curves.
CURVE_WINDOW = 10
LEARNED_LABEL = "Return per episode under the reward model learned from your answers"
LEARNED_NOTE = (
    "in the reward model's own units, which change when it is refitted at a query round (dashed lines): compare points "
    "between two lines, not across one"
)
TASK_LABEL = "Return per episode of the task's own reward (the goal of this run)"


def episode_sums(values: np.ndarray, dones: np.ndarray, running: np.ndarray) -> tuple[list[float], np.ndarray]:
    """
    Sum per-step values over the episodes of a rollout, carrying unfinished episodes across rollouts.

    :param values: ``(T, n_envs)`` per-step values (e.g. the learned reward)
    :param dones: ``(T, n_envs)`` episode ends (the step's episode ends after it)
    :param running: ``(n_envs,)`` sums of the episodes in progress when the rollout began
    :return: the sums of the episodes that ended, in order of their end, and the new running sums
    """
    running = np.array(running, dtype=np.float64)
    finished: list[float] = []
    for step_values, step_dones in zip(np.asarray(values, dtype=np.float64), np.asarray(dones, dtype=bool)):
        running += step_values
        for env_index in np.flatnonzero(step_dones):
            finished.append(float(running[env_index]))
            running[env_index] = 0.0
    return finished, running


def training_end(model: Any) -> int:
    """
    The step at which ``learn`` really stops: it collects whole rollouts (``n_steps * n_envs`` steps)
    until ``total_timesteps`` is reached, so it ends at the first rollout boundary at or after it.
    """
    start, total = int(model._num_timesteps_at_start), int(model._total_timesteps)
    rollout = int(getattr(model, "n_steps", 1)) * int(model.n_envs)
    return start + -(-(total - start) // rollout) * rollout if total > start else total


def next_query_step(model: Any) -> Optional[int]:
    """
    The step at whose rollout end the next query round of a ``PPO_REWARD``-style model is asked (after
    state-entropy pretraining: at the start of the first rollout after it), or None if that is not known.
    """
    needed = ("feedback_plan", "_num_interactions", "n_steps", "pref_learner")
    if any(not hasattr(model, name) for name in needed) or model.pref_learner is None or model.feedback_plan is None:
        return None
    plan = model.feedback_plan
    now, rollout = int(model.num_timesteps), int(model.n_steps) * int(model.n_envs)
    if getattr(model, "unsuper_flag", 0) == 2:
        return None  # preferences are never asked for
    if getattr(model, "unsuper_flag", 0) == 1 and not getattr(model, "_pretrain_done", True):
        left = int(plan.unsuper_step) - int(model._unsuper_steps_done)
        return now + max(0, -(-left // rollout)) * rollout
    if model.pref_learner.n_rounds == 0:
        return now + rollout
    left = int(plan.num_interaction) - int(model._num_interactions)
    return now + max(1, -(-left // rollout)) * rollout


class HumanFeedbackCallback(BaseCallback):
    """
    Shows training on the labelling page: the step (of the step training really ends at, rounded up to
    whole rollouts), the labels the reward model learned from, the queries asked, when the next query
    round comes (its step, and the time at the measured speed), and curves of what the person is
    teaching: the return per episode under the learned reward, a behaviour measure of the script's own
    if it gives one, and the task's own return only where the run says that return is the goal. Logs
    ``human/answered``, ``human/pending`` and, for a :class:`~sb3_pref.human.MixedTeacher`,
    ``human/agreement`` (share of the person's answers that match the scripted teacher's).

    :param teacher: a :class:`~sb3_pref.human.HumanTeacher` or :class:`~sb3_pref.human.MixedTeacher`
    :param behaviour: a per-step measure of the taught behaviour from the step's ``info`` (e.g. a
        pendulum's turn per step), summed over each episode into a curve; None: no such curve
    :param behaviour_label: what that curve shows, e.g. ``"Turns per episode (+ = counter-clockwise)"``
    :param task_reward_is_goal: the env's own reward measures what the person teaches: plot its return
        too, labelled as the goal (when the person teaches something else, that return misleads)
    """

    def __init__(
        self,
        teacher: Any,
        behaviour: Optional[Callable[[dict[str, Any]], float]] = None,
        behaviour_label: str = "Behaviour per episode",
        task_reward_is_goal: bool = False,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.teacher = teacher
        self.human = getattr(teacher, "human", teacher)
        self.behaviour, self.behaviour_label = behaviour, behaviour_label
        self.task_reward_is_goal = task_reward_is_goal
        self._windows: dict[str, deque] = {key: deque(maxlen=CURVE_WINDOW) for key in ("learned", "behaviour")}
        self._running: dict[str, np.ndarray] = {}
        self._dones: list[np.ndarray] = []
        self._rollout_start, self._waited = 0.0, 0.0
        self._steps_per_second: Optional[float] = None
        self._fitted = -1  # the reward model's update count at the last learned point: a change marks a refit
        self._refit = False  # a refit not yet marked on the curve (marked at the next learned point)

    def _report(self, **extra: Any) -> None:
        values: dict[str, Any] = {"timesteps": int(self.num_timesteps), "total_timesteps": training_end(self.model)}
        values["total_timesteps_asked"] = int(self.model._total_timesteps)
        learner = getattr(self.model, "pref_learner", None)
        if learner is not None:
            values.update(labels=len(learner.dataset), queries_asked=learner.total_feed, budget=learner.max_feed)
        next_round = next_query_step(self.model)
        if next_round is not None or learner is not None:
            # None says "no round is left": the page tells that apart from "not known" (absent).
            values["next_round"] = next_round if next_round is not None and next_round <= values["total_timesteps"] else None
        if self._steps_per_second:
            values["steps_per_second"] = self._steps_per_second
        values.update(extra)
        self.teacher.report_progress(**values)

    def _on_training_start(self) -> None:
        n_envs = self.model.n_envs
        self._running = {"learned": np.zeros(n_envs), "behaviour": np.zeros(n_envs)}
        # Steps of each env's episode in progress when the rollout began: to sum it again after a refit.
        self._episode_steps = np.zeros(n_envs, dtype=np.int64)
        # A resumed run continues its curves from its checkpoint's step: later points are dropped.
        self.human.add_curve_points(int(self.num_timesteps), {}, {})
        self._report(done=False)

    def _on_rollout_start(self) -> None:
        now, waited = time.monotonic(), self.human.progress.waited
        if self._rollout_start and self._dones:
            # Steps per second over the last rollout and policy update, less the time spent waiting for the person.
            spent = (now - self._rollout_start) - (waited - self._waited)
            if spent > 0:
                self._steps_per_second = len(self._dones) * self.model.n_envs / spent
        self._rollout_start, self._waited, self._dones = now, waited, []
        # A query round may just have come at this rollout's start (after pretraining): the next one is later.
        self._report()

    def _on_step(self) -> bool:
        dones = np.asarray(self.locals["dones"], dtype=bool).copy()
        self._dones.append(dones)
        if self.behaviour is not None:
            running = self._running["behaviour"]
            for env_index, info in enumerate(self.locals["infos"]):
                running[env_index] += float(self.behaviour(info))
                if dones[env_index]:
                    self._windows["behaviour"].append(running[env_index])
                    running[env_index] = 0.0
        # Every step: a query round may block inside the rollout (or come at its start, after pretraining),
        # and the page must show the step it waits at and the labels the reward model has learned from.
        learner = getattr(self.model, "pref_learner", None)
        if learner is None:
            self.teacher.report_progress(timesteps=int(self.num_timesteps))
        else:
            self.teacher.report_progress(
                timesteps=int(self.num_timesteps), labels=len(learner.dataset), queries_asked=learner.total_feed
            )
        return True

    def _learned_returns(self) -> None:
        """The rollout's learned rewards (the rollout is in the learner's store by now), summed per episode."""
        learner = getattr(self.model, "pref_learner", None)
        n_envs, n_steps = self.model.n_envs, len(self._dones)
        if learner is None or n_steps == 0 or len(learner.store) < n_steps * n_envs:
            return
        # Before the first label the reward model is untrained: its returns say nothing about the teaching.
        labelled = len(learner.dataset) > 0
        fitted = int(learner.reward_model.n_updates)
        refit = labelled and fitted != self._fitted
        # At a refit the episodes in progress are summed again from their start under the new model (their earlier
        # steps are in the learner's store), so no return mixes two models' units.
        back = int(self._episode_steps.max()) if refit else 0
        if back and len(learner.store) < (back + n_steps) * n_envs:  # the store no longer holds their start
            self._running["learned"][self._episode_steps > 0] = np.nan  # left out when they end
            back = 0
        obs, actions, _ = learner.store.last_transitions((back + n_steps) * n_envs)
        rewards = learner.predict_rewards(obs, actions).reshape(back + n_steps, n_envs)
        if back:
            self._running["learned"] = np.array(
                [rewards[back - steps : back, env].sum() for env, steps in enumerate(self._episode_steps)]
            )
        finished, self._running["learned"] = episode_sums(rewards[back:], np.stack(self._dones), self._running["learned"])
        if refit:
            # Returns under the old model are in other units: they leave the window, and the curve breaks here.
            self._windows["learned"].clear()
            self._refit, self._fitted = True, fitted
        if labelled:
            self._windows["learned"].extend(value for value in finished if np.isfinite(value))

    def _on_rollout_end(self) -> None:
        self._learned_returns()
        if self._dones:  # each env's episode in progress now: the steps after its last end in this rollout, if any
            dones = np.stack(self._dones)
            steps_after_end = np.argmax(dones[::-1], axis=0)
            self._episode_steps = np.where(dones.any(axis=0), steps_after_end, self._episode_steps + len(dones))
        points: dict[str, float] = {key: float(np.mean(window)) for key, window in self._windows.items() if window}
        if self.task_reward_is_goal and self.model.ep_info_buffer:
            points["task"] = float(np.mean([info["r"] for info in list(self.model.ep_info_buffer)[-CURVE_WINDOW:]]))
        labels = {"learned": LEARNED_LABEL, "behaviour": self.behaviour_label, "task": TASK_LABEL}
        refits = ("learned",) if self._refit and "learned" in points else ()
        self.human.add_curve_points(int(self.num_timesteps), points, labels, {"learned": LEARNED_NOTE}, refits)
        self._refit = self._refit and "learned" not in points
        self._report()
        counts = self.human.store.counts()
        self.logger.record("human/answered", counts["answered"])
        self.logger.record("human/pending", counts["pending"])
        agreement = self.human.agreement()
        if agreement["n"] > 0 and not math.isnan(agreement["rate"]):
            self.logger.record("human/agreement", agreement["rate"])
            self.logger.record("human/agreement_pairs", agreement["n"])

    def _on_training_end(self) -> None:
        self._report(done=True)
