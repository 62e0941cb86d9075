"""
:class:`MixedTeacher`: for large budgets, a scripted teacher answers most queries and a person a
random sample, and the two are compared on that sample.
"""

from typing import Any, ClassVar, Optional

import numpy as np

from sb3_pref.core.segments import SegmentBatch
from sb3_pref.core.teachers import BaseTeacher
from sb3_pref.human.rendering import RENDER_STATE_KEY
from sb3_pref.human.teacher import HumanTeacher


class MixedTeacher(BaseTeacher):
    """
    Each pair goes to the person with probability ``human_fraction``; the scripted teacher labels
    every pair. The person's answer is the label of the pairs they were shown; the scripted label is
    stored beside it, so :meth:`agreement` (also shown on the page and logged by
    :class:`~sb3_pref.human.HumanFeedbackCallback` as ``human/agreement``) says how often the two agree.

    With an asynchronous human teacher the sampled pairs get NaN now and the person's labels later
    (through :meth:`late_labels`); in blocking mode training waits only for the sampled pairs.

    :param scripted: the teacher answering the bulk (e.g. ``ScriptedTeacher.preset("oracle")``)
    :param human: the person's teacher
    :param human_fraction: probability of a pair being shown to the person, in ``[0, 1]``
    :param seed: seed of the sampling generator
    """

    required_info_keys: ClassVar[tuple[str, ...]] = (RENDER_STATE_KEY,)

    def __init__(self, scripted: BaseTeacher, human: HumanTeacher, human_fraction: float = 0.1, seed: Optional[int] = None):
        super().__init__()
        if not 0.0 <= float(human_fraction) <= 1.0:
            raise ValueError(f"human_fraction must be in [0, 1], got {human_fraction}")
        self.scripted = scripted
        self.human = human
        self.human_fraction = float(human_fraction)
        self.rng = np.random.default_rng(seed)

    def update_margin(self, margin: float) -> None:
        self.scripted.update_margin(margin)

    def label_pairs(self, seg_0: SegmentBatch, seg_1: SegmentBatch) -> np.ndarray:  # type: ignore[override]
        self.human.report_asked(len(seg_0))  # the page counts every query of the round, not only the person's
        scripted_labels = np.asarray(self.scripted.label_pairs(seg_0, seg_1), dtype=np.float64)
        to_human = self.rng.random(len(scripted_labels)) < self.human_fraction
        labels = scripted_labels.copy()
        self._count_labels(scripted_labels[~to_human])
        if to_human.any():
            labels[to_human] = self.human.ask(seg_0.take(to_human), seg_1.take(to_human), references=scripted_labels[to_human])
        return labels

    def late_labels(self) -> Optional[tuple[SegmentBatch, SegmentBatch, np.ndarray]]:
        """The person's answers not yet handed over (see :meth:`HumanTeacher.late_labels`)."""
        return self.human.late_labels()

    def carried_queries(self) -> int:
        """The person's pairs asked after a resumed run's checkpoint (see :meth:`HumanTeacher.carried_queries`)."""
        return self.human.carried_queries()

    def agreement(self) -> dict[str, float]:
        """:return: ``{"n", "agree", "rate"}``: pairs both answered (neither skipped), matching answers, their share"""
        return self.human.agreement()

    def report_progress(self, **values: Any) -> None:
        self.human.report_progress(**values)

    @property
    def counters(self) -> dict[str, int]:
        """The scripted share's counts plus the person's (asked, labelled, skipped, equal, flipped)."""
        human = self.human.counters
        return {key: value + human.get(key, 0) for key, value in self._counters.items()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "counters": dict(self._counters),
            "scripted": self.scripted.state_dict(),
            "human": self.human.state_dict(),
            "rng_state": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.scripted.load_state_dict(state["scripted"])
        self.human.load_state_dict(state["human"])
        self.rng.bit_generator.state = state["rng_state"]

    def close(self) -> None:
        self.human.close()
