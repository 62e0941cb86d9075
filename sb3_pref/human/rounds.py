"""
The two threads of a :class:`~sb3_pref.human.teacher.HumanTeacher` and the query round that passes
between them: the render thread turns a round's pairs into clips and registers them in the
:class:`~sb3_pref.human.store.LabelStore`; in blocking mode the training thread waits for the round's
answers (or its timeout).

Separate from :mod:`sb3_pref.human.teacher` because this is the concurrency machinery (one condition
variable shared by two threads, deadlines, errors carried across threads), while ``teacher`` holds the
API the learner and the page call. :class:`HumanRoundsMixin` is a base of ``HumanTeacher`` only: its
methods use the teacher's attributes, declared below for type checkers.
"""

import os
import queue
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Union

import gymnasium as gym

from sb3_pref.core.segments import SegmentBatch
from sb3_pref.human.rendering import RENDER_STATE_KEY, SegmentRenderer
from sb3_pref.human.server import FeedbackServer
from sb3_pref.human.store import LabelStore


@dataclass
class _Round:
    """The queries of one ``label_pairs`` call, filled in by the render thread as clips are ready."""

    index: int
    seg_0: SegmentBatch
    seg_1: SegmentBatch
    references: Optional[list[str]]
    asked: float
    query_ids: list[int] = field(default_factory=list)
    done: bool = False
    error: Optional[BaseException] = None

    def __len__(self) -> int:
        return len(self.seg_0)


def _env_factory(render_env: Union[str, Callable[[], gym.Env]]) -> Callable[[], gym.Env]:
    if isinstance(render_env, str):
        return lambda: gym.make(render_env, render_mode="rgb_array")
    if callable(render_env):
        return render_env
    raise ValueError(f"render_env must be a gymnasium id or a function returning an env, got {render_env!r}")


class HumanRoundsMixin:
    """The render thread and the blocking wait of :class:`~sb3_pref.human.teacher.HumanTeacher`."""

    # For type checkers: HumanTeacher.__init__ sets these.
    timeout: Optional[float]
    correction_window: float
    verbose: int
    media_dir: str
    store: LabelStore
    renderer: SegmentRenderer
    server: Optional[FeedbackServer]
    _cond: threading.Condition
    _rendering: int
    _waiting: Optional[_Round]
    _deadline: Optional[float]
    _render_error: Optional[BaseException]
    _jobs: "queue.Queue[Optional[_Round]]"

    if TYPE_CHECKING:

        @property
        def url(self) -> Optional[str]: ...  # HumanTeacher's

    # ------------------------------------------------------------ waiting (blocking mode)
    def _wait(self, job: _Round, take: bool = True) -> dict[int, str]:
        """
        Wait until every pair of ``job`` is answered or its timeout passes.

        :param take: mark the answers as handed to the learner (False: only wait; ``late_labels`` hands them over)
        :return: the answers of the job's pairs
        """
        take_answers = self.store.take_answers if take else self.store.answers
        announced = False
        with self._cond:
            self._waiting, self._deadline = job, None
        try:
            while True:
                with self._cond:
                    if job.error is not None:
                        raise RuntimeError(f"preparing the clips of round {job.index} failed: {job.error!r}") from job.error
                    if job.done and self._deadline is None and self.timeout is not None:
                        self._deadline = time.monotonic() + self.timeout
                    done, query_ids, deadline = job.done, list(job.query_ids), self._deadline
                answers = self.store.answers(query_ids)
                # take_answers marks them used: from here on the page can no longer correct them.
                if done and len(answers) == len(job) and not self._may_still_correct(query_ids):
                    return take_answers(query_ids)
                if deadline is not None and time.monotonic() >= deadline:
                    answers = take_answers(query_ids)
                    self._report_timeout(job, len(answers))
                    return answers
                if not announced and self.verbose and self.server is not None:
                    limit = "no time limit" if self.timeout is None else f"{self.timeout:.0f} s once the clips are ready"
                    print(f"[HumanTeacher] round {job.index}: training waits for {len(job)} answers at {self.url} ({limit})")
                    announced = True
                with self._cond:
                    self._cond.wait(0.25)
        finally:
            with self._cond:
                self._waiting, self._deadline = None, None

    def _may_still_correct(self, query_ids: list[int]) -> bool:
        """
        The round's last answer is younger than ``correction_window``: training takes the answers a moment later, so
        the person can still change it (once taken, an answer is final).
        """
        if self.correction_window <= 0:
            return False
        latest = self.store.last_answer_time(query_ids)
        return latest is not None and time.time() - latest < self.correction_window

    def _report_timeout(self, job: _Round, n_answered: int) -> None:
        message = (
            f"[HumanTeacher] round {job.index}: {len(job) - n_answered} of {len(job)} pairs were not answered within "
            f"{self.timeout:g} s; training goes on and counts them as skipped. They stay on the page: "
            "answers given later join the reward model at the next round."
        )
        warnings.warn(message, stacklevel=3)

    def _on_answer(self, query_id: int, choice: str) -> None:
        with self._cond:
            self._cond.notify_all()

    # ------------------------------------------------------------ rendering thread
    def _render_loop(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                self._render_round(job)
        finally:
            # The render env's OpenGL context belongs to this thread: release it here.
            self.renderer.close()

    def _render_round(self, job: _Round) -> None:
        registered = 0
        try:
            for index in range(len(job)):
                stem = uuid.uuid4().hex
                # Both clips of a pair at once: at one scale (one crop), so they stay comparable.
                paths = self.renderer.write_clips(
                    [segments.extras[RENDER_STATE_KEY][index] for segments in (job.seg_0, job.seg_1)],
                    [os.path.join(self.media_dir, f"{stem}_{side}") for side in (0, 1)],
                )
                names = [os.path.basename(path) for path in paths]
                reference = job.references[index] if job.references is not None else None
                query_id = self.store.add_query(
                    job.seg_0, job.seg_1, index, (names[0], names[1]), job.index, reference=reference, asked=job.asked
                )
                with self._cond:
                    job.query_ids.append(query_id)
                    self._rendering -= 1
                    registered += 1
                    self._cond.notify_all()
        except BaseException as error:  # reported in the training thread, never lost in this one
            job.error = error
            self._render_error = error
        finally:
            with self._cond:
                self._rendering -= len(job) - registered
                job.done = True
                self._cond.notify_all()
