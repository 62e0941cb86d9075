"""
:class:`HumanTeacher`: a person answers the queries on a local web page.

The path of one query: the learner calls :meth:`HumanTeacher.label_pairs` in the training thread;
the pairs go to a render thread, which re-renders both segments from their recorded simulator
states, writes two clips and registers the query in the run's :class:`LabelStore`; the page shows
the oldest unanswered query; the person's answer is committed to the store at once. In blocking
mode ``label_pairs`` returns when the round is answered (or timed out); in asynchronous mode it
returns at once, and every answer reaches the learner through :meth:`HumanTeacher.late_labels` at
the start of a later round. Which answers were handed over is part of the teacher's state, saved
in every checkpoint: a run resumed from a checkpoint receives exactly the answers its dataset lacks.

The render thread and the blocking wait are in :mod:`sb3_pref.human.rounds`, what the page is told about
training (progress, result, status) in :mod:`sb3_pref.human.status`: both are bases of the teacher.
"""

import os
import queue
import threading
import time
from typing import Any, Callable, ClassVar, Optional, Union

import gymnasium as gym
import numpy as np

from sb3_pref.core.segments import SegmentBatch
from sb3_pref.core.teachers import BaseTeacher
from sb3_pref.human.choices import CHOICE_LABELS, label_to_choice
from sb3_pref.human.progress import PageProgress
from sb3_pref.human.rendering import RENDER_STATE_KEY, SegmentRenderer
from sb3_pref.human.rounds import HumanRoundsMixin, _env_factory, _Round
from sb3_pref.human.server import FeedbackServer
from sb3_pref.human.status import HumanStatusMixin
from sb3_pref.human.store import LabelStore

MODES = ("blocking", "async")


class HumanTeacher(HumanStatusMixin, HumanRoundsMixin, BaseTeacher):
    """
    A person labels the queries on a local web page showing the two segments of each pair as looping
    clips. Usable wherever a scripted teacher is: ``PPO_REWARD(..., teacher=HumanTeacher(...))``.
    The training envs must record render states: ``make_vec_env(..., wrapper_class=RenderStateWrapper)``.

    Labels: left (``seg_0``) = 0.0, right (``seg_1``) = 1.0, equal = 0.5, can't tell = NaN (skipped).

    Modes:

    - ``"blocking"``: ``label_pairs`` waits until every pair of the round is answered. After
      ``timeout`` seconds (counted from the moment the round's last clip is ready) it warns how many
      pairs are unanswered and returns NaN (skipped) for them; answers given later are not lost: they
      join the dataset at the next round, like asynchronous answers.
    - ``"async"``: ``label_pairs`` returns NaN for every pair at once and training goes on with the
      labels it has; each answer joins the dataset at the start of the next query round (see
      :meth:`late_labels`), even after the query budget is spent.

    Durability: each answer is committed to ``run_dir/labels.sqlite`` when it is given. The set of
    answers already handed to the learner is in :meth:`state_dict`, saved with every checkpoint, so a
    run restarted from a checkpoint (same ``run_dir``) receives every answer its dataset lacks, once.
    A ``run_dir`` belongs to one run: a new run pointed at an old folder reuses its answers.

    :param render_env: gymnasium id, or a function building the env that renders clips (created with
        ``render_mode="rgb_array"``, in the render thread); the same task as the training envs
    :param run_dir: folder of the run's label database and clips
    :param mode: ``"blocking"`` or ``"async"``
    :param timeout: blocking mode: seconds the person has per round once its clips are ready; None waits forever
    :param instruction: what the person should prefer, shown above the clips
    :param when_alike: what to answer when both clips look alike for the instruction (e.g. "prefer the higher
        swing"), shown under it; empty: answer "Can't tell" (see :data:`sb3_pref.human.page.WHEN_ALIKE`)
    :param host: interface the page binds; keep the loopback default (use an SSH tunnel from elsewhere)
    :param port: TCP port of the page; 0 picks a free one
    :param token: access token; None draws a random one (printed in the URL)
    :param fps: clip frame rate; None plays in real time (``metadata["render_fps"]``)
    :param video_format: ``mp4`` (H.264), ``webm`` or ``gif``; None: mp4 if imageio-ffmpeg is installed
    :param trail: frames of motion trail drawn behind moving parts of the clips, so the direction of motion
        shows in every frame; None: on for classic-control envs (fixed camera, plain background), off otherwise
    :param crop: crop each pair's clips to what they draw, at one scale for both (a pendulum then fills a phone's
        clip); None: on for classic-control envs, off otherwise (see :class:`SegmentRenderer`)
    :param correction_window: blocking mode: seconds training waits after a round's last answer before taking the
        round, so that answer can still be changed on the page (0: take it at once)
    :param resume_command: what the page tells the person to run if the training process stops (e.g. the
        script with ``--resume`` and its newest checkpoint), or a function returning it when asked; None: a
        general sentence
    :param serve: start the web page (False: answers come through :attr:`store` only, e.g. in tests)
    :param verbose: 1 prints the URL, waits and timeouts; 0 is silent
    """

    required_info_keys: ClassVar[tuple[str, ...]] = (RENDER_STATE_KEY,)

    def __init__(
        self,
        render_env: Union[str, Callable[[], gym.Env]],
        run_dir: Union[str, os.PathLike] = "human_feedback",
        mode: str = "blocking",
        timeout: Optional[float] = 600.0,
        instruction: str = "",
        host: str = "127.0.0.1",
        port: int = 0,
        token: Optional[str] = None,
        fps: Optional[float] = None,
        video_format: Optional[str] = None,
        serve: bool = True,
        verbose: int = 1,
        trail: Optional[int] = None,
        resume_command: Optional[Union[str, Callable[[], str]]] = None,
        correction_window: float = 5.0,
        crop: Optional[bool] = None,
        when_alike: str = "",
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be 'blocking' or 'async', got {mode!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None (wait forever), got {timeout}")
        if not correction_window >= 0:
            raise ValueError(f"correction_window must be a number of seconds >= 0, got {correction_window}")
        self.mode = mode
        self.timeout = timeout
        self.correction_window = float(correction_window)
        self.verbose = verbose
        self.run_dir = os.path.abspath(os.fspath(run_dir))
        self.media_dir = os.path.join(self.run_dir, "clips")
        os.makedirs(self.media_dir, exist_ok=True)
        self.store = LabelStore(os.path.join(self.run_dir, "labels.sqlite"))
        # Kept in the run folder: `python -m sb3_pref.human serve` shows the same question later.
        if instruction:
            self.store.set_meta("instruction", instruction)
        else:
            instruction = self.store.get_meta("instruction", "")
        self.instruction = instruction
        if when_alike:  # the page reads it from the run folder, so `serve` shows it too
            self.store.set_meta("when_alike", when_alike)
        self.renderer = SegmentRenderer(_env_factory(render_env), fps=fps, video_format=video_format, trail=trail, crop=crop)
        self.resume_command = resume_command
        self._delivered: set[int] = set()
        self._round = 0
        # A run resumed from a checkpoint (see load_state_dict): the first round after the checkpoint and the pairs
        # asked since, which the learner counts once (reported) and, in blocking mode, waits for (waited) instead of
        # asking new pairs in their place; the page's notice speaks of them until they are answered.
        self._restart: Optional[tuple[int, list[int]]] = None
        self._carried_reported = self._carried_waited = True
        self.progress = PageProgress(self.store)
        self._cond = threading.Condition()
        self._rendering = 0  # pairs handed to the render thread and not yet registered
        self._waiting: Optional[_Round] = None
        self._deadline: Optional[float] = None
        self._render_error: Optional[BaseException] = None
        self._closed = False
        self._jobs: queue.Queue[Optional[_Round]] = queue.Queue()
        self._render_thread = threading.Thread(target=self._render_loop, name="sb3-pref-render", daemon=True)
        self._render_thread.start()
        self.server: Optional[FeedbackServer] = None
        if serve:
            self.server = FeedbackServer(
                self.store,
                self.media_dir,
                host=host,
                port=port,
                token=token,
                status=self.status,
                on_answer=self._on_answer,
                instruction=instruction,
            )
            if verbose:
                print(f"[HumanTeacher] label the queries at {self.server.url}  (answers saved in {self.store.path})")

    # ------------------------------------------------------------ the teacher API
    @property
    def url(self) -> Optional[str]:
        """The labelling page, token included (None without a server)."""
        return self.server.url if self.server is not None else None

    def label_pairs(self, seg_0: SegmentBatch, seg_1: SegmentBatch) -> np.ndarray:  # type: ignore[override]
        self.report_asked(len(seg_0))
        return self.ask(seg_0, seg_1)

    def report_asked(self, n_pairs: int) -> None:
        """Count ``n_pairs`` more queries as asked on the page now (the learner's count follows after the round)."""
        self.progress.count_asked(n_pairs)

    def ask(self, seg_0: SegmentBatch, seg_1: SegmentBatch, references: Optional[np.ndarray] = None) -> np.ndarray:
        """
        Show the pairs to the person (the render thread prepares the clips).

        :param seg_0: first segments (left clips), with ``extras["render_state"]``
        :param seg_1: second segments (right clips)
        :param references: another teacher's labels for the same pairs, stored to report agreement
        :return: labels ``(N,)``: in blocking mode the answers (NaN for skipped or timed out), in
            asynchronous mode all NaN (the answers arrive through :meth:`late_labels`)
        """
        self._check_open()
        for name, segments in (("seg_0", seg_0), ("seg_1", seg_1)):
            if RENDER_STATE_KEY not in segments.extras:
                raise ValueError(
                    f"{name} carries no '{RENDER_STATE_KEY}': wrap the training envs in RenderStateWrapper, "
                    "e.g. make_vec_env(env_id, wrapper_class=sb3_pref.human.RenderStateWrapper)"
                )
        if len(seg_0) != len(seg_1):
            raise ValueError(f"seg_0 and seg_1 differ in length: {len(seg_0)} and {len(seg_1)}")
        n_pairs = len(seg_0)
        self._counters["asked"] += n_pairs
        if n_pairs == 0:
            return np.zeros(0)
        self._round += 1
        choices = None if references is None else [label_to_choice(float(label)) for label in references]
        job = _Round(self._round, seg_0, seg_1, choices, asked=time.time())
        with self._cond:
            self._rendering += n_pairs
        self._jobs.put(job)
        if self.mode == "async":
            return np.full(n_pairs, np.nan)
        waiting_since = time.monotonic()
        answers = self._wait(job)
        self.progress.waited += time.monotonic() - waiting_since
        # The learner fits its reward model on these next: the page says so until the callback reports the labels.
        self.progress.learning = bool(answers)
        answered = [query_id for query_id in job.query_ids if query_id in answers]
        self._deliver(answered, [answers[query_id] for query_id in answered])
        return np.array([CHOICE_LABELS[answers[query_id]] if query_id in answers else np.nan for query_id in job.query_ids])

    def late_labels(self) -> Optional[tuple[SegmentBatch, SegmentBatch, np.ndarray]]:
        """
        Every stored answer not yet handed to the learner (asynchronous answers, answers given after
        a blocking round timed out, answers of a run that crashed after its last checkpoint), once.
        ``PreferenceLearner.query_round`` calls this at the start of every round.

        :return: ``(seg_0, seg_1, labels)`` of those pairs (skipped ones as NaN), or None if there are none
        """
        self._check_open()
        if not self._carried_waited and self.mode == "blocking":
            self._wait_for_carried()
        answers = self.store.take_answers()
        new = [query_id for query_id in answers if query_id not in self._delivered]
        if not new:
            return None
        seg_0, seg_1 = self.store.load_pairs(new)
        labels = self._deliver(new, [answers[query_id] for query_id in new])
        return seg_0, seg_1, labels

    def carried_queries(self) -> int:
        """
        The pairs this run's page asked after the checkpoint it was resumed from (see :meth:`load_state_dict`),
        reported once: the learner counts them against its budget and its next round asks only what they lack, so
        a crash never makes the person answer more than ``max_feed`` pairs.
        """
        if self._carried_reported or self._restart is None:
            return 0
        self._carried_reported = True
        return len(self._restart[1])

    def _wait_for_carried(self) -> None:
        """Blocking mode: the round interrupted by the crash waits for its unanswered pairs, still on the page."""
        self._carried_waited = True
        if self._restart is None:
            return
        ids = self._restart[1]
        seg_0, seg_1 = self.store.load_pairs(ids)
        job = _Round(self._round, seg_0, seg_1, None, asked=time.time(), query_ids=ids, done=True)
        waiting_since = time.monotonic()
        self._wait(job, take=False)
        self.progress.waited += time.monotonic() - waiting_since

    def _deliver(self, query_ids: list[int], choices: list[str]) -> np.ndarray:
        labels = np.array([CHOICE_LABELS[choice] for choice in choices], dtype=np.float64)
        self._delivered.update(query_ids)
        skipped = int(np.isnan(labels).sum())
        self._counters["skipped"] += skipped
        self._counters["labelled"] += len(labels) - skipped
        self._counters["equal"] += int((labels == 0.5).sum())
        return labels

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this HumanTeacher is closed")
        if self._render_error is not None and self.mode == "async":
            error, self._render_error = self._render_error, None
            raise RuntimeError(f"preparing clips failed: {error!r}") from error

    # ------------------------------------------------------------ persistence and clean-up
    def state_dict(self) -> dict[str, Any]:
        """:return: counters, round count and the ids of the answers already handed to the learner"""
        state = super().state_dict()
        # Until the learner has counted the pairs carried over a restart, a checkpoint is still taken before them.
        round_index = self._restart[0] - 1 if self._restart is not None and not self._carried_reported else self._round
        state.update(round=round_index, delivered=sorted(self._delivered))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`: answers not in ``delivered`` will be handed over by :meth:`late_labels`."""
        super().load_state_dict(state)
        self._round = int(state.get("round", 0))
        self._delivered = {int(query_id) for query_id in state.get("delivered", [])}
        last = self.store.last_round()
        self._restart, self._carried_reported, self._carried_waited = None, True, True
        if last > self._round:
            # The pairs asked after the checkpoint stay what the person is asked: no new clips in their place.
            self._restart = (self._round + 1, self.store.queries_after_round(self._round))
            self._carried_reported = self._carried_waited = False
            self._round = last

    def export_dataset(self, path: Union[str, os.PathLike]) -> int:
        """Write every answered pair of this run to a ``.npz`` preference dataset. :return: pairs written"""
        return self.store.export_npz(path)

    def close(self) -> None:
        """Stop the page and the render thread (answers are already on disk). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.server is not None:
            self.server.close()
        self._jobs.put(None)
        self._render_thread.join(timeout=30)
        self.store.close()

    def __enter__(self) -> "HumanTeacher":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()
