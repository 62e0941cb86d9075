"""An SB3 callback that shows training progress on the labelling page and logs the person's answers."""

import math
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback


class HumanFeedbackCallback(BaseCallback):
    """
    After every rollout: sends the training progress to the page (steps done, labels learned from,
    queries asked, mean true episode return) and logs ``human/answered``, ``human/pending`` and, for a
    :class:`~sb3_pref.human.MixedTeacher`, ``human/agreement`` (share of the person's answers that
    match the scripted teacher's).

    :param teacher: a :class:`~sb3_pref.human.HumanTeacher` or :class:`~sb3_pref.human.MixedTeacher`
    """

    def __init__(self, teacher: Any, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.teacher = teacher

    def _report(self, **extra: Any) -> None:
        values: dict[str, Any] = {"timesteps": int(self.num_timesteps), "total_timesteps": int(self.model._total_timesteps)}
        learner = getattr(self.model, "pref_learner", None)
        if learner is not None:
            values.update(labels=len(learner.dataset), queries_asked=learner.total_feed, budget=learner.max_feed)
        if self.model.ep_info_buffer:
            values["ep_rew_mean"] = float(np.mean([info["r"] for info in self.model.ep_info_buffer]))
        values.update(extra)
        self.teacher.report_progress(**values)

    def _on_training_start(self) -> None:
        self._report(done=False)

    def _on_step(self) -> bool:
        # Every step: a query round blocks inside the rollout, and the page must show the step it waits at.
        self.teacher.report_progress(timesteps=int(self.num_timesteps))
        return True

    def _on_rollout_end(self) -> None:
        self._report()
        human = getattr(self.teacher, "human", self.teacher)
        counts = human.store.counts()
        self.logger.record("human/answered", counts["answered"])
        self.logger.record("human/pending", counts["pending"])
        agreement = human.agreement()
        if agreement["n"] > 0 and not math.isnan(agreement["rate"]):
            self.logger.record("human/agreement", agreement["rate"])
            self.logger.record("human/agreement_pairs", agreement["n"])

    def _on_training_end(self) -> None:
        self._report(done=True)
