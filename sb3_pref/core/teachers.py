"""Teachers turn pairs of segments into preference labels (scripted B-Pref teachers here, humans later)."""

import abc
import math
from typing import Any, ClassVar, Optional, Protocol, Union

import numpy as np

COUNTER_KEYS = ("asked", "labelled", "skipped", "equal", "flipped")
# Looked up by name when restoring a generator; an explicit table rather than getattr on user data.
_BIT_GENERATORS = {
    cls.__name__: cls for cls in (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64, np.random.MT19937)
}

#: Index of each consumer's child in ``np.random.SeedSequence(seed).spawn(N_STREAMS)``: one seed gives
#: the teacher (label noise) and the learner (segment sampling, minibatches) independent streams, so
#: label noise does not depend on which segments were drawn. A child depends only on its index, so adding a
#: stream leaves the others as they were.
TEACHER_STREAM, LEARNER_STREAM, REPLAY_STREAM, SURF_STREAM, QPA_STREAM, EVAL_STREAM = 0, 1, 2, 3, 4, 5
N_STREAMS = 6


def stream_generator(seed: Optional[int], stream: int) -> np.random.Generator:
    """
    :param seed: the run's seed (None: fresh OS entropy, not reproducible)
    :param stream: ``TEACHER_STREAM``, ``LEARNER_STREAM`` or ``REPLAY_STREAM`` (an off-policy writer's draws) or
        ``SURF_STREAM`` (SURF's unlabelled pairs and crops) or ``QPA_STREAM`` (QPA's crops) or ``EVAL_STREAM`` (the
        pairs that measure the reward model against an oracle, a diagnostic that must not move the run)
    :return: a generator on that stream, independent of the other streams of the same seed
    """
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(N_STREAMS)[stream])


class RewardSegments(Protocol):
    """Anything shaped like ``SegmentBatch`` as far as a teacher cares: true per-step rewards ``(N, H)``."""

    rewards: np.ndarray


class BaseTeacher(abc.ABC):
    """
    The seam between query selection and the preference dataset. A teacher receives two aligned
    batches of segments and returns one float label per pair:
    ``1.0`` = ``seg_1`` preferred, ``0.0`` = ``seg_0`` preferred, ``0.5`` = equal, ``NaN`` = skipped.

    The base class keeps cumulative counters so that every teacher (scripted or human) reports the same keys: a
    subclass calls :meth:`_count_labels` with the labels it returns, and the logger's ``reward/skipped`` and
    ``reward/equal`` count its answers.
    """

    #: ``info`` keys whose per-step values the algorithm must record with each segment (e.g. the
    #: simulator state a human teacher's videos are rendered from); scripted teachers need none.
    required_info_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self._counters = dict.fromkeys(COUNTER_KEYS, 0)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a subclass whose __init__ skipped super().__init__() gets its
        # counters on first use instead of an AttributeError in the middle of training.
        if name == "_counters":
            self._counters = dict.fromkeys(COUNTER_KEYS, 0)
            return self._counters
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @abc.abstractmethod
    def label_pairs(self, seg_0: RewardSegments, seg_1: RewardSegments) -> np.ndarray:
        """
        :param seg_0: the first segment of each pair (``SegmentBatch``-like, at least ``.rewards`` of shape ``(N, H)``)
        :param seg_1: the second segment of each pair, aligned with ``seg_0``
        :return: float64 labels ``(N,)`` following the label convention
        """

    def update_margin(self, margin: float) -> None:  # noqa: B027 (optional hook, not abstract on purpose)
        """
        Called before each query round with the average true return of one segment.
        Teachers without adaptive thresholds ignore it.

        :param margin: mean true return of recent episodes * segment length / episode length
        """

    @property
    def counters(self) -> dict[str, int]:
        """Cumulative ``asked, labelled, skipped, equal, flipped`` counts (a copy)."""
        return dict(self._counters)

    def _count_labels(self, labels: np.ndarray, flipped: int = 0) -> None:
        # Derived from the labels themselves so every teacher counts the same way:
        # labelled includes "equal" answers, skipped is the NaN count.
        skipped = int(np.isnan(labels).sum())
        self._counters["asked"] += len(labels)
        self._counters["skipped"] += skipped
        self._counters["labelled"] += len(labels) - skipped
        self._counters["equal"] += int((labels == 0.5).sum())
        self._counters["flipped"] += int(flipped)

    def state_dict(self) -> dict[str, Any]:
        """:return: a JSON-serialisable snapshot (plain ints, floats, lists and dicts)"""
        return {"counters": self.counters}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """:param state: a dict produced by :meth:`state_dict`"""
        counters = state.get("counters", {})
        self._counters = {key: int(counters.get(key, 0)) for key in COUNTER_KEYS}


def _check_number(value: Any, argument: str, example: str) -> float:
    # Strings ("0.1") and bools are mistakes, not values to convert (validation.py imports this module).
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        kind = type(value).__name__
        raise TypeError(f"{argument} must be a number, got {value!r} (a {kind}): pass e.g. {argument}={example}")
    return float(value)


def _check_seed(seed: Any) -> Optional[int]:
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}: pass e.g. seed=0")
    return int(seed)


def _check_probability(value: float, argument: str) -> float:
    value = _check_number(value, argument, "0.1")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{argument} must be a probability in [0, 1], got {value}: pass e.g. {argument}=0.1")
    return value


class ScriptedTeacher(BaseTeacher):
    """
    The B-Pref simulated teacher, judging pairs by their true rewards. Per call, in this order:

    1. skip (only if ``thres_skip > 0``, as B-Pref tests it: with a margin <= 0, e.g. negative rewards,
       nothing is skipped): pairs whose undiscounted returns both are ``<= thres_skip`` get ``NaN``;
    2. equal mask: kept pairs with ``|R0 - R1| < thres_equal`` (undiscounted);
    3. myopic discount: step ``t`` of ``H`` weighs ``gamma ** (H - 1 - t)`` (the latest step weighs 1);
    4. ``beta > 0``: label 1 drawn with probability ``sigmoid(beta * (S1 - S0))`` (Boltzmann-rational);
       ``beta <= 0``: label 1 iff ``S0 < S1`` (ties give 0);
    5. each kept label flipped with probability ``eps_mistake``;
    6. masked pairs are overridden with ``0.5``, after the flip.

    Counters: ``asked`` counts every pair, ``skipped`` the NaN labels, ``labelled`` the rest (including
    ``equal`` answers), ``equal`` the masked pairs, and ``flipped`` only the flips that survive step 6
    (a flip overridden by "equal" changed nothing the learner sees).

    Randomness comes from the teacher's own generator, the teacher stream of ``seed`` (see
    :func:`stream_generator`: a learner given the same seed draws from another, independent stream);
    :meth:`state_dict` stores its state so that a restored teacher continues the exact same label stream.

    :param beta: rationality; ``<= 0`` means perfectly rational, ``> 0`` Boltzmann-rational with that inverse temperature
    :param gamma: myopic discount in ``(0, 1]``; 1 = no discount
    :param eps_mistake: probability of flipping each label
    :param eps_skip: fraction of the margin below which both segments are too poor to judge (0 = never skip)
    :param eps_equal: fraction of the margin below which two returns count as equal (0 = never equal)
    :param seed: seed of the teacher's random generator
    """

    PRESETS: ClassVar[dict[str, dict[str, float]]] = {
        "oracle": {"beta": -1, "gamma": 1, "eps_mistake": 0, "eps_skip": 0, "eps_equal": 0},
        "noisy": {"beta": 1, "gamma": 1, "eps_mistake": 0, "eps_skip": 0, "eps_equal": 0},
        "myopic": {"beta": -1, "gamma": 0.9, "eps_mistake": 0, "eps_skip": 0, "eps_equal": 0},
        "mistake": {"beta": -1, "gamma": 1, "eps_mistake": 0.1, "eps_skip": 0, "eps_equal": 0},
        "skip": {"beta": -1, "gamma": 1, "eps_mistake": 0, "eps_skip": 0.1, "eps_equal": 0},
        "equal": {"beta": -1, "gamma": 1, "eps_mistake": 0, "eps_skip": 0, "eps_equal": 0.1},
    }

    def __init__(
        self,
        beta: float = -1,
        gamma: float = 1,
        eps_mistake: float = 0,
        eps_skip: float = 0,
        eps_equal: float = 0,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        self._configure(beta, gamma, eps_mistake, eps_skip, eps_equal)
        seed = _check_seed(seed)
        self.seed = seed
        self.thres_skip = 0.0
        self.thres_equal = 0.0
        self.rng = stream_generator(seed, TEACHER_STREAM)

    def _configure(self, beta: float, gamma: float, eps_mistake: float, eps_skip: float, eps_equal: float) -> None:
        if not math.isfinite(_check_number(beta, "beta", "-1")):
            raise ValueError(f"beta must be a finite float (<= 0 for a rational teacher), got {beta}")
        gamma = _check_number(gamma, "gamma", "1")
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}: use gamma=1 for no myopic discount")
        self.beta = float(beta)
        self.gamma = gamma
        self.eps_mistake = _check_probability(eps_mistake, "eps_mistake")
        self.eps_skip = _check_probability(eps_skip, "eps_skip")
        self.eps_equal = _check_probability(eps_equal, "eps_equal")

    @classmethod
    def preset(cls, name: str, seed: Optional[int] = None) -> "ScriptedTeacher":
        """
        :param name: one of ``oracle, noisy, myopic, mistake, skip, equal`` (B-Pref's teachers)
        :param seed: seed of the teacher's random generator
        :return: a teacher configured as in the B-Pref table
        """
        if name not in cls.PRESETS:
            raise ValueError(f"name={name!r} is not a teacher preset: choose one of {', '.join(cls.PRESETS)}")
        return cls(**cls.PRESETS[name], seed=seed)

    def reseed(self, seed: Optional[int]) -> None:
        """Restart the teacher's random stream from ``seed`` (used by algorithms to follow their own seed)."""
        seed = _check_seed(seed)
        self.seed = seed
        self.rng = stream_generator(seed, TEACHER_STREAM)

    def update_margin(self, margin: float) -> None:
        """
        :param margin: average true return of one segment (mean episode return * segment length / episode length)
        """
        margin = float(margin)
        if not math.isfinite(margin):
            raise ValueError(f"margin must be finite, got {margin}: compute it from finite episode returns")
        self.thres_skip = margin * self.eps_skip
        self.thres_equal = margin * self.eps_equal

    def label_pairs(self, seg_0: RewardSegments, seg_1: RewardSegments) -> np.ndarray:
        return self.label(seg_0.rewards, seg_1.rewards)

    @staticmethod
    def _check_rewards(rewards_0: np.ndarray, rewards_1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # float64 so that sums of long float32 segments do not flip near-ties through rounding
        rewards_0 = np.asarray(rewards_0, dtype=np.float64)
        rewards_1 = np.asarray(rewards_1, dtype=np.float64)
        for argument, rewards in (("rewards_0", rewards_0), ("rewards_1", rewards_1)):
            if rewards.ndim != 2:
                raise ValueError(f"{argument} must have shape (N, H) (pairs, segment length), got {rewards.shape}")
            if not np.isfinite(rewards).all():
                raise ValueError(f"{argument} contains NaN or inf: the teacher needs finite true rewards")
        if rewards_0.shape != rewards_1.shape:
            raise ValueError(f"rewards_0 {rewards_0.shape} and rewards_1 {rewards_1.shape} must have the same shape (N, H)")
        return rewards_0, rewards_1

    def label(self, rewards_0: np.ndarray, rewards_1: np.ndarray) -> np.ndarray:
        """
        :param rewards_0: true per-step rewards of the first segments, ``(N, H)``
        :param rewards_1: true per-step rewards of the second segments, ``(N, H)``
        :return: float64 labels ``(N,)``: 1.0 second preferred, 0.0 first, 0.5 equal, NaN skipped
        """
        rewards_0, rewards_1 = self._check_rewards(rewards_0, rewards_1)
        n_pairs, horizon = rewards_0.shape
        labels = np.full(n_pairs, np.nan)
        sum_0, sum_1 = rewards_0.sum(axis=1), rewards_1.sum(axis=1)

        kept = np.ones(n_pairs, dtype=bool)
        if self.thres_skip > 0:
            kept = np.maximum(sum_0, sum_1) > self.thres_skip
        equal = np.abs(sum_0[kept] - sum_1[kept]) < self.thres_equal

        weights = self.gamma ** np.arange(horizon - 1, -1, -1, dtype=np.float64)
        disc_0, disc_1 = rewards_0[kept] @ weights, rewards_1[kept] @ weights
        if self.beta > 0:
            # sigmoid(beta * (S1 - S0)) == exp(b S1) / (exp(b S0) + exp(b S1)), without overflow
            p_second = np.exp(-np.logaddexp(0.0, -self.beta * (disc_1 - disc_0)))
            kept_labels = (self.rng.random(len(p_second)) < p_second).astype(np.float64)
        else:
            kept_labels = (disc_0 < disc_1).astype(np.float64)

        flips = np.zeros(len(kept_labels), dtype=bool)
        if self.eps_mistake > 0:
            # strict "<" so that eps_mistake=0 can never flip (B-Pref's "<=" could, with probability 2**-53)
            flips = self.rng.random(len(kept_labels)) < self.eps_mistake
            kept_labels[flips] = 1.0 - kept_labels[flips]
        kept_labels[equal] = 0.5
        labels[kept] = kept_labels

        self._count_labels(labels, flipped=int((flips & ~equal).sum()))
        return labels

    def state_dict(self) -> dict[str, Any]:
        """:return: config, thresholds, counters and generator state, all JSON-serialisable"""
        state = super().state_dict()
        state.update(
            config={
                "beta": self.beta,
                "gamma": self.gamma,
                "eps_mistake": self.eps_mistake,
                "eps_skip": self.eps_skip,
                "eps_equal": self.eps_equal,
                "seed": self.seed,
            },
            thres_skip=float(self.thres_skip),
            thres_equal=float(self.thres_equal),
            rng_state=self.rng.bit_generator.state,
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """
        Restores config, thresholds, counters and the generator, so labelling continues the same stream.

        :param state: a dict produced by :meth:`state_dict`
        """
        super().load_state_dict(state)
        config = dict(state["config"])
        self.seed = config.pop("seed", None)
        self._configure(**config)
        self.thres_skip = float(state["thres_skip"])
        self.thres_equal = float(state["thres_equal"])
        rng_state = state["rng_state"]
        name = rng_state["bit_generator"]
        if name not in _BIT_GENERATORS:
            raise ValueError(f"rng_state names bit generator {name!r}: expected one of {', '.join(_BIT_GENERATORS)}")
        bit_generator = _BIT_GENERATORS[name]()
        bit_generator.state = rng_state
        self.rng = np.random.Generator(bit_generator)


def make_teacher(teacher: Union[BaseTeacher, str, None], seed: Optional[int] = None) -> Optional[BaseTeacher]:
    """A teacher object from a teacher, a B-Pref preset name, or None."""
    if teacher is None or isinstance(teacher, BaseTeacher):
        return teacher
    if isinstance(teacher, str):
        return ScriptedTeacher.preset(teacher, seed=seed)
    raise ValueError(f"teacher must be a BaseTeacher or one of {sorted(ScriptedTeacher.PRESETS)}, got {teacher!r}")
