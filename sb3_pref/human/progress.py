"""
What the labelling page shows about training, kept by a :class:`~sb3_pref.human.HumanTeacher` for the
server's threads to read: the progress values :class:`~sb3_pref.human.HumanFeedbackCallback` reports
(steps, labels, queries asked, the next query round) and the training curves.

The curves are kept in the run folder (the store's ``curves`` meta) as they grow, so a run resumed
from a checkpoint, or ``python -m sb3_pref.human serve``, shows them at once; a resumed run drops the
points after its checkpoint's step and draws them again.
"""

import shlex
import threading
from collections.abc import Sequence
from typing import Any, Optional

from sb3_pref.human.store import LabelStore

#: Points kept per curve (older points are thinned out, never the newest).
CURVE_POINTS = 200
CURVES_META = "curves"


def serve_command(run_dir: str) -> str:
    """:return: the command that serves a run folder's waiting pairs without a training process"""
    return f"python -m sb3_pref.human serve {shlex.quote(run_dir)}"


class PageProgress:
    """
    The training side of the page's status, shared between the training thread (writes) and the
    server's threads (reads): every write replaces a whole dict or list, so a reader never sees one
    half-updated.

    :param store: the run's label store, where the curves are kept
    """

    def __init__(self, store: LabelStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self.values: dict[str, Any] = {}
        saved = store.get_meta(CURVES_META, [])
        self.curves: list[dict[str, Any]] = saved if isinstance(saved, list) else []
        #: A blocking round's answers reached the learner and its reward model is being fitted: the page says so
        #: until the callback reports the labels it learned from.
        self.learning = False
        #: Seconds training has spent waiting for the person (blocking rounds): not part of its speed.
        self.waited = 0.0

    def report(self, **values: Any) -> None:
        """Merge progress values (``timesteps``, ``labels``, ``next_round``...); the labels end the learning notice."""
        with self._lock:
            self.values = {**self.values, **values}
            if "labels" in values:
                self.learning = False
            progress = self.values
        if values.get("done"):
            self.store.set_meta("progress", progress)

    def count_asked(self, n_pairs: int) -> None:
        with self._lock:
            self.values = {**self.values, "queries_asked": int(self.values.get("queries_asked", 0)) + int(n_pairs)}

    def add_points(
        self,
        step: int,
        values: dict[str, float],
        labels: dict[str, str],
        notes: Optional[dict] = None,
        refits: Sequence[str] = (),
    ) -> None:
        """
        Add one point per curve at ``step`` and keep the curves in the run folder. Points after ``step``
        are dropped first: a run resumed from a checkpoint continues its curves from there.

        :param step: the training step of the points
        :param values: curve key -> value at ``step`` (none: only drop the later points)
        :param labels: curve key -> what the curve measures, shown above it
        :param notes: curve key -> a remark shown after the label (optional)
        :param refits: keys of the curves whose measure changed before this point (the reward model was refitted):
            the page breaks the line there and marks the step, so a change of units does not read as a change of the
            agent (kept in the curve's ``refits``)
        """
        notes, step = notes or {}, int(step)
        with self._lock:
            curves = {curve["key"]: curve for curve in self.curves}
            for key, curve in list(curves.items()):
                last = step - 1 if key in values else step  # the last step kept (a new point at step replaces the old)
                kept = [point for point in curve["points"] if point[0] <= last]
                curves[key] = {**curve, "points": kept, "refits": [mark for mark in curve.get("refits", []) if mark <= last]}
            for key, value in values.items():
                curve = curves.get(key, {"key": key, "points": [], "refits": []})
                points = [*curve["points"], [int(step), float(value)]]
                marks = [*curve.get("refits", []), int(step)] if key in refits and curve["points"] else curve.get("refits", [])
                if len(points) > CURVE_POINTS:  # bounded: thin out the older half
                    points = points[: -CURVE_POINTS // 2 : 2] + points[-CURVE_POINTS // 2 :]
                    marks = [mark for mark in marks if mark >= points[0][0]]
                curves[key] = {**curve, "label": labels.get(key, curve.get("label", key)), "note": notes.get(key, ""),
                               "points": points, "refits": marks}  # fmt: skip
            self.curves = [curve for curve in curves.values() if curve["points"]]
            saved = self.curves
        self.store.set_meta(CURVES_META, saved)
