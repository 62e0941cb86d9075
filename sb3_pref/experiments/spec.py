"""
One run of a grid, fully resolved (:class:`RunSpec`): what ``run.json`` records, and what its run id
and fingerprint are computed from. The config (:mod:`sb3_pref.experiments.config`) expands a grid into these.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Optional, cast

from sb3_pref.experiments.axes import Budget

#: episodes of the deterministic evaluation that closes a run, unless its grid says otherwise (``eval_episodes``)
EVAL_EPISODES = 10


@dataclass(frozen=True)
class RunSpec:
    """
    One run of a grid, fully resolved: everything it needs to start, or to resume, on any machine.

    :param algo: the run's kind (:mod:`~sb3_pref.experiments.registry`): ``"ppo"``, ``"prefppo"``, ``"pebble"``,
        ``"sac"``, ``"rl2"``, ``"ad"`` or one a user registered
    :param task: the task name as written in the config
    :param seed: seed of the envs, the networks and the teacher
    :param hyperparameters: the run's settings (B-Pref flag names; B-Pref's ``train_PEBBLE.py`` names for
        pebble / sac; or :data:`~sb3_pref.experiments.defaults.RL2_KEYS`)
    :param teacher: the teacher's name (kinds that learn from preferences: prefppo, pebble)
    :param teacher_params: the teacher's ``beta, gamma, eps_mistake, eps_skip, eps_equal`` (the same kinds)
    :param budget: the feedback budget (the same kinds)
    :param checkpoint_every: env steps between checkpoints
    :param keep_checkpoints: keep the checkpoints once the run has finished
    :param eval_episodes: episodes of the deterministic evaluation that closes the run (kinds with an ``eval_env``;
        0 skips it)
    """

    algo: str
    task: str
    seed: int
    hyperparameters: dict[str, Any]
    teacher: Optional[str] = None
    teacher_params: Optional[dict[str, float]] = None
    budget: Optional[Budget] = None
    checkpoint_every: int = 100_000
    keep_checkpoints: bool = False
    eval_episodes: int = EVAL_EPISODES

    @property
    def run_id(self) -> str:
        """The run's folder inside the grid's output folder, e.g. ``prefppo/walker_walk/oracle/1000x100/seed0``."""
        parts = [self.algo, self.task]
        if self.budget is not None:
            # a run of a kind that learns from preferences: the grid gave it a teacher and a budget together
            parts += [cast(str, self.teacher), self.budget.label]
        return "/".join([*parts, f"seed{self.seed}"])

    @property
    def total_timesteps(self) -> int:
        return int(self.hyperparameters["total_timesteps"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSpec":
        data = dict(data)
        if data.get("budget") is not None:
            data["budget"] = Budget(**data["budget"])
        return cls(**data)

    def fingerprint(self) -> str:
        """A hash of what decides the run's results (not of its checkpoint settings)."""
        content = {key: value for key, value in self.to_dict().items() if key not in ("checkpoint_every", "keep_checkpoints")}
        if self.eval_episodes == EVAL_EPISODES:  # runs from before the setting existed keep their fingerprint
            content.pop("eval_episodes")
        content.pop("budget", None)
        if self.budget is not None:
            content["budget"] = [self.budget.max_feed, self.budget.re_batch]
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = ["EVAL_EPISODES", "RunSpec"]
