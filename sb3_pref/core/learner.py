"""
The preference loop, independent of any RL algorithm: transitions go into a segment store; a query
round picks pairs of segments, asks the teacher, stores the labels and refits the reward model;
the model then relabels whole rollouts in one batched pass.
"""

import warnings
from typing import Any, Callable, Optional, Union

import numpy as np

from sb3_pref.core import pair_draws
from sb3_pref.core.checks import user_stacklevel
from sb3_pref.core.feedback_plan import BPREF_SCHEDULE, FeedbackPlan
from sb3_pref.core.learner_io import learner_state, load_learner_state

# SURF_POOL_*: importable from here as before they moved with the SURF pool's draw (not part of __all__, as before).
from sb3_pref.core.learner_reward import SURF_POOL_MAX as SURF_POOL_MAX
from sb3_pref.core.learner_reward import SURF_POOL_RATIO as SURF_POOL_RATIO
from sb3_pref.core.learner_reward import LearnerRewardMixin
from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.qpa import PairCrops
from sb3_pref.core.query import QUERY_METHODS, resolve_query_method
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.reward_training import check_schedule
from sb3_pref.core.rime import RIMEFilter
from sb3_pref.core.segments import SegmentStore
from sb3_pref.core.surf import SURFLoss
from sb3_pref.core.teachers import (
    EVAL_STREAM,
    LEARNER_STREAM,
    QPA_STREAM,
    SURF_STREAM,
    BaseTeacher,
    stream_generator,
)

#: B-Pref's round size and reward passes, for a learner that follows no plan and a model that sets none
BPREF_ROUND_SIZE = BPREF_SCHEDULE["on_policy"]["round_size"]
BPREF_RE_UPDATE = BPREF_SCHEDULE["on_policy"]["re_update"]


class PreferenceLearner(LearnerRewardMixin):
    """
    Owns everything preference learning needs besides the policy: the segment store, the teacher,
    query selection, the labelled pairs, the reward model and the feedback budget.

    :param reward_model: the reward model to train (it also supplies ``size_segment``, ``large_batch`` and, where
        the algorithm's feedback plan does not set them, the round sizes ``initial_mb_size`` and ``mb_size``)
    :param n_envs: number of parallel envs whose transitions are stored
    :param teacher: who labels the queries; defaults to ``reward_model.teacher``
    :param feed_type: query selection, by B-Pref id (0-5) or name (see ``QUERY_METHODS``)
    :param max_feed: total feedback budget (queries asked, skipped ones included)
    :param re_update: the most reward-training epochs per query round (None: B-Pref's 100 until a
        :class:`~sb3_pref.core.feedback_plan.FeedbackPlan` sets it, see :meth:`follow_plan`)
    :param target_accuracy: early-stop threshold on the reward model's training accuracy
    :param schedule: reward-model training per round: ``"auto"`` (passes until the loss on held-out
        labels stops improving) or ``"bpref"`` (B-Pref's up to ``re_update`` passes over all labels); see
        :mod:`sb3_pref.core.reward_training`
    :param max_ep_len: episode length used for the teacher's thresholds; None uses the observed mean
    :param segment_capacity: transitions kept for drawing segments (oldest dropped)
    :param normalize_rewards: rescale predictions to mean 0 / std 1 on recent transitions after each refit
    :param normalize_before: also fit that gain/bias just before each refit (the RLHF document's
        ``normalize_before``); without ``normalize_rewards`` the pre-training gain/bias stays in use after it
    :param normalization_sampler: returns the ``(N, obs_dim + act_dim)`` features the gain/bias are
        fitted on (e.g. states paired with reference-policy actions); None uses the newest stored transitions
    :param anneal_lr: decay the reward model's learning rate linearly to 0 over each round's gradient steps
    :param n_eval_pairs: fresh pairs used to measure agreement with an oracle after each round
    :param first_round_uniform: the first round draws its pairs uniformly (B-Pref), whatever ``feed_type`` is:
        a model that has seen no label has nothing to disagree about yet; False uses ``feed_type`` from the start
    :param rime: filter the labels before each round with RIME's robust filter (:mod:`sb3_pref.core.rime`):
        train on those the ensemble finds plausible, flip those it finds very implausible
    :param rune_beta: RUNE's exploration bonus weight at the start (0: off): rewards for the policy are the
        ensemble's mean plus ``beta_t`` times its std over members
    :param rune_decay: RUNE's decay of ``beta_t`` per env step
    :param surf: SURF's semi-supervised training (:mod:`sb3_pref.core.surf`): each round also draws unlabelled pairs,
        and the reward model learns from those its members are confident about, on temporal crops
    :param qpa_episodes: QPA's policy-aligned queries: draw each round's candidate segments from the last this many
        episodes of all envs only (0: from every stored episode)
    :param qpa_crops: QPA's data augmentation: the reward model's loss counts each labelled pair this many times, each
        on random crops of 70-90% of its segments (:mod:`sb3_pref.core.qpa`; QPA: 20; 0: the whole pairs, once)
    :param seed: seed of the learner's generator (segment sampling, minibatch order): the learner stream
        of ``seed`` (:func:`~sb3_pref.core.teachers.stream_generator`), independent of a teacher
        seeded with the same number

    A round that is due before any stored episode piece is ``size_segment`` steps long (rollouts
    shorter than a segment) asks nothing and spends no budget: it waits for more data, as B-Pref
    does (:attr:`ready` says whether a round can run).
    """

    def __init__(
        self,
        reward_model: RewardModel,
        n_envs: int,
        teacher: Optional[BaseTeacher] = None,
        feed_type: Union[int, str] = 0,
        max_feed: int = 1400,
        re_update: Optional[int] = 100,
        target_accuracy: float = 0.97,
        max_ep_len: Optional[int] = None,
        segment_capacity: int = 100_000,
        normalize_rewards: bool = False,
        anneal_lr: bool = False,
        normalize_before: bool = False,
        normalization_sampler: Optional[Callable[[], np.ndarray]] = None,
        n_eval_pairs: int = 256,
        first_round_uniform: bool = True,
        seed: Optional[int] = None,
        schedule: str = "auto",
        rime: bool = False,
        rune_beta: float = 0.0,
        rune_decay: float = 0.0,
        qpa_episodes: int = 0,
        surf: bool = False,
        qpa_crops: int = 0,
    ) -> None:
        self.feed_type = resolve_query_method(feed_type)
        self.schedule = check_schedule(schedule, "reward_schedule")
        if max_feed < 1:
            raise ValueError(
                f"max_feed={max_feed} asks the teacher nothing, so the reward model would never be trained and the policy "
                "would learn from its random initial weights: give the label budget (e.g. max_feed=400), or leave out the "
                "reward model to train on the env's reward"
            )
        if reward_model.mb_size is not None and max_feed < reward_model.mb_size:
            raise ValueError(
                f"max_feed={max_feed} is smaller than one query round (mb_size={reward_model.mb_size}): "
                "raise max_feed or lower the reward model's mb_size (re_batch)"
            )
        re_update = BPREF_RE_UPDATE if re_update is None else re_update
        if re_update < 1:
            raise ValueError(f"re_update must be >= 1, got {re_update}")
        if max_ep_len is not None and max_ep_len < 1:
            raise ValueError(f"max_ep_len must be a positive number of steps, got {max_ep_len}")
        self.reward_model = reward_model
        # How the reward model learns: RewardTrainer's seams (label filter, loss terms) are where methods that
        # change training plug in; assign a configured trainer of the same model to use them.
        self._trainer: Optional[RewardTrainer] = None
        self.label_filter: Optional[RIMEFilter] = RIMEFilter() if rime else None
        self.rune_beta, self.rune_decay = float(rune_beta), float(rune_decay)
        if isinstance(qpa_episodes, bool) or not isinstance(qpa_episodes, (int, np.integer)) or qpa_episodes < 0:
            raise ValueError(f"qpa_episodes must be an int >= 0 (e.g. 10, QPA's on DMC; 0 turns it off), got {qpa_episodes!r}")
        self.qpa_episodes = int(qpa_episodes)
        # QPA's crops draw with their own stream of the seed, as SURF does
        self.pair_crops = PairCrops(qpa_crops, seed=stream_generator(seed, QPA_STREAM)) if qpa_crops else None
        # SURF draws with its own stream of the seed: the learner's draws are the same with it on or off.
        self.surf: Optional[SURFLoss] = SURFLoss(seed=stream_generator(seed, SURF_STREAM)) if surf else None
        self.teacher = teacher if teacher is not None else reward_model.teacher
        self.max_feed = int(max_feed)
        self.re_update = int(re_update)
        self.target_accuracy = float(target_accuracy)
        self.max_ep_len = max_ep_len
        self.normalize_rewards = normalize_rewards
        self.normalize_before = normalize_before
        self.normalization_sampler = normalization_sampler
        self.anneal_lr = anneal_lr
        self.n_eval_pairs = int(n_eval_pairs)
        self.first_round_uniform = bool(first_round_uniform)
        self.rng = stream_generator(seed, LEARNER_STREAM)
        # The agreement diagnostic draws its own pairs: switching it off (n_eval_pairs=0) leaves the run as it was.
        self.eval_rng = stream_generator(seed, EVAL_STREAM)
        self._rounds_waited = 0
        #: what :meth:`load_state_dict` restores of the saved teacher, one of
        #: :data:`~sb3_pref.core.learner_io.RESTORE_TEACHER_MODES` (``"all"``: settings, counters and generator)
        self.restore_teacher = "all"
        self.store = SegmentStore(n_envs, reward_model.obs_dim, reward_model.act_dim, capacity=segment_capacity)
        # Room beyond the budget: a resumed run re-asks the queries of its last unsaved round while a
        # person's answers to them may still arrive, and no answer should push out an older one.
        self.dataset = PreferenceDataset(capacity=2 * self.max_feed)
        self.total_feed = 0
        self.labeled_feedback = 0
        self.n_rounds = 0
        # The round sizes of the algorithm's feedback plan (None: the reward model's, see round_size).
        self.first_round_size: Optional[int] = None
        self.later_round_size: Optional[int] = None
        # Affine map applied to predictions when normalize_rewards is on (identity otherwise).
        self.reward_shift = 0.0
        self.reward_scale = 1.0

    @property
    def size_segment(self) -> int:
        return self.reward_model.size_segment

    @property
    def budget_left(self) -> int:
        return self.max_feed - self.total_feed

    @property
    def ready(self) -> bool:
        """True when the store holds at least one episode piece ``size_segment`` steps long to draw queries from."""
        return self.store.fits(self.size_segment)

    # ------------------------------------------------------------------ data in
    def add_transitions(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None:
        """
        :param obs: encoded raw observations ``(T, n_envs, obs_dim)``
        :param actions: encoded actions ``(T, n_envs, act_dim)``
        :param rewards: true rewards ``(T, n_envs)`` (for the scripted teacher and for logging)
        :param dones: episode ends ``(T, n_envs)``
        :param extras: per-step values the teacher needs (``teacher.required_info_keys``), ``(T, n_envs, dim)``
        """
        self.store.add(obs, actions, rewards, dones, extras=extras)

    # ------------------------------------------------------------- query round
    def segment_margin(self) -> float:
        """B-Pref's teacher margin: the mean true return of one segment in recent episodes."""
        returns = self.store.recent_episode_returns
        if len(returns) > 0:
            max_ep_len = self.max_ep_len or float(np.mean(self.store.recent_episode_lengths))
            return float(np.mean(returns) * self.size_segment / max_ep_len)
        # No episode has finished yet (long episodes): the same quantity from per-step rewards.
        _, _, rewards = self.store.last_transitions(len(self.store))
        return float(np.mean(rewards) * self.size_segment) if len(rewards) else 0.0

    def query_round(self, method: Optional[Union[int, str]] = None) -> dict[str, float]:
        """
        Store the teacher's late labels (if it has any), ask up to ``mb_size`` queries (clamped to the
        budget left), store the labels, refit the model. Once the budget is spent, a round with late
        labels still refits the model; a round with nothing new does nothing and returns ``{}``.

        :param method: query selection for this round; None uses ``feed_type`` (uniform on the first round, with
            ``first_round_uniform``)
        :return: statistics of the round, keys as logged under ``reward/``
        """
        # Pairs a teacher asked after the checkpoint this learner was restored from (a person's page before a crash):
        # they were asked within the budget, so they count against it, and the round they belong to asks only the rest.
        carried = self._take_carried_queries()
        self.total_feed += carried
        n_late = self._add_late_labels()
        n_new = n_late
        n_queries = min(max(self.round_size() - carried, 0), self.budget_left)
        if n_queries > 0 and not self.ready:
            # Not one segment fits yet: ask later rather than fail (B-Pref waits for enough data too).
            n_queries = 0
            self._rounds_waited += 1
            if self._rounds_waited == 1:  # said at once: until an episode lasts a segment, nothing is learnt
                warnings.warn(
                    f"a query round found no episode piece of size_segment={self.size_segment} steps (the longest "
                    f"stored has {self.store.max_piece_length}): nothing is asked until an episode lasts that long, "
                    "and the policy trains on an untrained reward meanwhile. Lower size_segment (the reward model's), "
                    "or use a fixed-horizon version of the env: an env that ends early (CartPole-v1, a fall) shows its "
                    "teacher segments of different lengths, which preferences over fixed-length segments cannot compare",
                    stacklevel=user_stacklevel(),
                )
        if carried and n_queries <= 0:
            self.n_rounds += 1  # the interrupted round, completed by the pairs it carried over
        stats: dict[str, float] = {key: float(n) for key, n in (("carried_queries", carried), ("late_labels", n_late)) if n}
        if n_queries <= 0 and n_late == 0:
            return stats
        if n_queries > 0:
            if method is None:
                method = "uniform" if self.n_rounds == 0 and self.first_round_uniform else self.feed_type
            method = resolve_query_method(method)
            self.teacher.update_margin(self.segment_margin())
            recent = self.qpa_episodes or None  # QPA: only the behaviour the policy has now
            seg_0, seg_1 = pair_draws.draw_queries(
                self.store, self.reward_model, self.dataset, self.rng, method, n_queries, recent
            )
            labels = np.asarray(self.teacher.label_pairs(seg_0, seg_1), dtype=np.float64)
            self.total_feed += n_queries
            added = self.dataset.add(seg_0, seg_1, labels)
            self.labeled_feedback += added
            n_new += added
            self.n_rounds += 1
            stats["round_queries"] = float(n_queries)
        if len(self.dataset) > 0:
            if self.normalize_before:
                self._fit_normalisation()
            if self.surf is not None and self.ready:  # late labels in a round with no segment to draw: last pool kept
                self._draw_unlabelled_pool(n_queries)
            fit = self.trainer.fit(
                self.dataset,
                self.rng,
                max_epochs=self.re_update,
                target_accuracy=self.target_accuracy,
                anneal_lr=self.anneal_lr,
                schedule=self.schedule,
                n_new=n_new,
            )
            stats.update(
                model_train_accuracy=fit["accuracy"],
                model_train_loss=fit["loss"],
                model_train_epochs=fit["epochs"],
                model_train_steps=fit["steps"],
            )
            if "held_out_loss" in fit:  # the "auto" schedule's early-stop criterion
                stats.update(model_held_out_loss=fit["held_out_loss"], model_held_out_accuracy=fit["held_out_accuracy"])
            stats.update(getattr(self.trainer.label_filter, "stats", {}))
            if self.surf is not None:
                stats.update(self.surf.stats)
        if self.normalize_rewards:
            self._fit_normalisation()
        stats["true_pref_accuracy"] = self.oracle_agreement()
        return stats

    def round_size(self) -> int:
        """
        Queries the next round asks before the budget clamps it: the feedback plan's first and later round sizes;
        without a plan, the model's ``initial_mb_size`` first, then ``mb_size`` (B-Pref's 128 when it has none).
        """
        model = self.reward_model
        later = self.later_round_size or model.mb_size or BPREF_ROUND_SIZE
        if self.n_rounds == 0:
            return self.first_round_size or model.initial_mb_size or later
        return later

    def follow_plan(self, plan: FeedbackPlan) -> None:
        """:param plan: the algorithm's feedback plan: its round sizes and reward-training passes apply from now on"""
        self.first_round_size = plan.first_round or None
        self.later_round_size = plan.round_size
        self.re_update = int(plan.re_update)

    def _take_carried_queries(self) -> int:
        """
        Teachers that can outlive a training process (a person's page, whose questions stay in the run folder) expose
        ``carried_queries() -> int``: the pairs asked after the checkpoint this learner was restored from, which its
        ``total_feed`` does not count. Their answers arrive through ``late_labels``; the teacher reports them once.
        """
        carried_queries = getattr(self.teacher, "carried_queries", None)
        carried = int(carried_queries()) if carried_queries is not None else 0
        if carried < 0:
            raise ValueError(f"{type(self.teacher).__name__}.carried_queries() returned {carried}, expected a count >= 0")
        return carried

    def _add_late_labels(self) -> int:
        """
        Teachers whose answers can arrive after ``label_pairs`` returned (a person answering
        asynchronously) expose ``late_labels() -> (seg_0, seg_1, labels) | None``; those pairs join the
        dataset here. They were counted against the budget when they were asked.

        :return: labelled (non-skipped) pairs added
        """
        late_labels = getattr(self.teacher, "late_labels", None)
        delivered = late_labels() if late_labels is not None else None
        if delivered is None:
            return 0
        seg_0, seg_1, labels = delivered
        added = self.dataset.add(seg_0, seg_1, np.asarray(labels, dtype=np.float64))
        self.labeled_feedback += added
        return added

    # ------------------------------------------------------------- persistence
    def counters(self) -> dict[str, float]:
        """Budget and teacher counters, keys as logged under ``reward/``."""
        teacher = self.teacher.counters
        return {
            "total_feed": float(self.total_feed),
            "labeled_feedback": float(self.labeled_feedback),
            "skipped": float(teacher.get("skipped", 0)),
            "equal": float(teacher.get("equal", 0)),
            "flipped": float(teacher.get("flipped", 0)),
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: budget, labels, stored segments, generators, teacher state."""
        return learner_state(self)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore :meth:`state_dict` (``strict`` is accepted for SB3's ``set_parameters``)."""
        load_learner_state(self, state)


__all__ = ["QUERY_METHODS", "PreferenceLearner"]
