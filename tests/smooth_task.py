"""A smooth synthetic preference task shared by the successors' tests: how well a learner's reward comes out."""

from typing import Any

import numpy as np

from sb3_pref import RewardModel, ScriptedTeacher
from sb3_pref.core.learner import PreferenceLearner


def learned_agreement(seed: int, **options: Any) -> tuple[float, dict[str, float]]:
    """
    16 labels of a smooth task (4 envs, 200-step episodes, a tanh of a random linear reward), 100 reward passes.

    :param seed: the task's, the model's, the teacher's and the learner's seed
    :param options: ``PreferenceLearner`` options under test (``surf=True``, ``qpa_crops=20``, ...)
    :return: the learned reward's agreement with the true one on 4000 fresh pairs, and the round's statistics
    """
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=6)
    learner = PreferenceLearner(
        RewardModel(6, 1, size_segment=20, mb_size=16, seed=seed), n_envs=4, teacher=ScriptedTeacher(beta=-1, seed=seed),
        feed_type="uniform", max_feed=16, re_update=100, target_accuracy=1.01, seed=seed, **options,
    )  # fmt: skip
    obs = np.cumsum(rng.normal(scale=0.3, size=(2000, 4, 6)), axis=0)
    obs = (obs - obs.mean(0) + rng.normal(size=obs.shape)).astype(np.float32)
    dones = np.zeros((2000, 4), dtype=bool)
    dones[199::200] = True
    learner.add_transitions(obs, np.zeros((2000, 4, 1), np.float32), np.tanh(obs @ weights).astype(np.float32), dones)
    stats = learner.query_round()
    return learner.oracle_agreement(4000), stats
