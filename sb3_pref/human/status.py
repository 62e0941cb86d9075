"""
What a :class:`~sb3_pref.human.teacher.HumanTeacher` tells the labelling page about training: the
progress and curves the callback reports, the trained agent's result, and the status the page polls
(round, clips being rendered, time left, agreement, the notice after a restart, how to resume).

Separate from :mod:`sb3_pref.human.teacher` because this is the display side, read by the server's
threads and fed by the training callback, while ``teacher`` holds the query path the learner calls
and the teacher's saved state. :class:`HumanStatusMixin` is a base of ``HumanTeacher`` only: its
methods use the teacher's attributes, declared below for type checkers.
"""

import math
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from sb3_pref.human.progress import PageProgress, serve_command
from sb3_pref.human.rounds import _Round
from sb3_pref.human.store import LabelStore


class HumanStatusMixin:
    """The page's status and the progress reports of :class:`~sb3_pref.human.teacher.HumanTeacher`."""

    # For type checkers: HumanTeacher.__init__ sets these.
    mode: str
    run_dir: str
    media_dir: str
    store: LabelStore
    progress: PageProgress
    resume_command: Optional[Union[str, Callable[[], str]]]
    _cond: threading.Condition
    _rendering: int
    _waiting: Optional[_Round]
    _deadline: Optional[float]
    _round: int
    _restart: Optional[tuple[int, list[int]]]

    def report_progress(self, **values: Any) -> None:
        """
        Training progress shown on the page (``timesteps``, ``total_timesteps``, ``labels``, ``budget``,
        ``queries_asked``, ``next_round``, ``steps_per_second``, ``done``...); ``done=True`` also keeps the
        progress in the run folder, for ``python -m sb3_pref.human serve``.
        """
        self.progress.report(**values)

    def add_curve_points(
        self,
        step: int,
        values: dict[str, float],
        labels: dict[str, str],
        notes: Optional[dict[str, str]] = None,
        refits: Sequence[str] = (),
    ) -> None:
        """
        Add a point at ``step`` to each of the page's training curves named in ``values`` (see
        :meth:`PageProgress.add_points <sb3_pref.human.progress.PageProgress.add_points>`: later points are
        dropped, so a resumed run continues its curves from its checkpoint).
        """
        self.progress.add_points(step, values, labels, notes, refits)

    def show_result(self, text: str, video: Optional[Union[str, os.PathLike]] = None) -> None:
        """
        Show the trained agent on the page (and in a later ``python -m sb3_pref.human serve``): a line
        of text and optionally a clip of the final policy (copied into the run's clips folder).

        :param text: e.g. the final policy's return
        :param video: a video or GIF file (e.g. written by :class:`SegmentRenderer`)
        """
        final: dict[str, Any] = {"text": str(text)}
        if video is not None:
            source = os.fspath(video)
            extension = os.path.splitext(source)[1].lower()
            if extension not in (".mp4", ".webm", ".gif"):
                raise ValueError(f"video must be an .mp4, .webm or .gif file, got {source!r}")
            name = f"final_{uuid.uuid4().hex[:12]}{extension}"
            shutil.copyfile(source, os.path.join(self.media_dir, name))
            final["clip"] = name
        self.store.set_meta("final", final)

    def status(self) -> dict[str, Any]:
        """:return: what the page shows about training (called from the server's threads)"""
        with self._cond:
            job, deadline, rendering = self._waiting, self._deadline, self._rendering
            query_ids = list(job.query_ids) if job is not None else []
        progress = self.progress.values
        asked, budget = progress.get("queries_asked"), progress.get("budget")
        status: dict[str, Any] = {
            "training": "finished" if progress.get("done") else "running",
            "mode": self.mode,
            "round": self._round,
            "rendering": max(0, rendering),
            "waiting": job is not None,
            "progress": progress,
            "budget_reached": bool(budget) and asked is not None and asked >= budget,
            "learning": self.progress.learning and job is None,
            "curves": self.progress.curves,
            "final": self.store.get_meta("final"),
            "notice": self._restart_notice(),
            "agreement": self.store.agreement(),
            "resume": self.resume_hint(),
        }
        if job is not None:
            status["round_left"] = len(job) - len(self.store.answers(query_ids))
            status["seconds_left"] = None if deadline is None else max(0.0, deadline - time.monotonic())
        if math.isnan(status["agreement"]["rate"]):
            status["agreement"] = None
        return status

    def resume_hint(self) -> dict[str, str]:
        """:return: what the page tells the person to run if training stops: ``command`` (resume) and ``serve``"""
        command = self.resume_command
        if callable(command):
            try:
                command = command()
            except Exception:  # the page's status must not fail with the user's function: it falls back to a sentence
                command = ""
        return {"command": str(command or ""), "serve": serve_command(self.run_dir)}

    def agreement(self) -> dict[str, float]:
        """:return: agreement of the person with the reference labels given to :meth:`ask` (see ``LabelStore.agreement``)"""
        return self.store.agreement()

    def _restart_notice(self) -> str:
        """What the page says after a restart from a checkpoint, while the pairs asked before the crash are unanswered."""
        if self._restart is None:
            return ""
        first_round, ids = self._restart
        left = len(ids) - len(self.store.answers(ids))
        if left <= 0:
            return ""  # every pair of the interrupted rounds answered: the notice no longer applies
        pairs = "1 pair" if left == 1 else f"{left} pairs"
        return (
            f"Training restarted from a checkpoint taken before query round {first_round}. Your answers are kept; "
            f"the {pairs} asked before the restart and not answered yet come first, and no pair is asked twice."
        )
