"""
Named settings of the whole AD pipeline besides the seed's (the seed's are the defaults of
:class:`~sb3_pref.ad.ad.AD`, :func:`~sb3_pref.ad.collect.record_learner` and ``DarkRoom``).

:data:`NOISY_ROOM` is the smallest setting in which in-context learning shows on held-out goals on a
CPU in one to two minutes, following AD^epsilon (Zisman et al., "Emergence of in-context reinforcement
learning from noise distillation"): the source "learner" is DarkRoom's shortest path with
epsilon-greedy noise annealed from 1 to 0, and every history is one short run from scratch that
fits whole in the model's context. Two choices make improvement visible inside a context, where
long histories of a fast learner (tabular Q-learning on a small room converges within a few
episodes) mostly show a learner repeating its last path:

- the improvement spans the context: epsilon reaches 0 after ``anneal_fraction`` of the history's
  ``episodes`` episodes, so a window holds a learner going from random to expert;
- many short histories per goal (``learners_per_goal``), each exactly ``seq_len`` transitions, so a
  training window always starts at a learner's first episode, as an evaluation trial does.
"""

from collections.abc import Sequence
from typing import Any

from sb3_pref.ad.collect import record_learner
from sb3_pref.ad.histories import Histories
from sb3_pref.envs.darkroom import Goal

#: 5 x 5 DarkRoom, 8-step episodes with reward on every step on the goal, 8 of 24 goals held out
#: (``split_goals(seed, size=5, n_test=8)``), histories and context of 6 whole episodes.
NOISY_ROOM: dict[str, Any] = dict(
    room=dict(size=5, episode_length=8, terminate_on_goal=False, observation="xy"),
    n_test=8,
    episodes=6,
    learner="noisy_expert",
    learners_per_goal=20,
    learner_kwargs=dict(anneal_fraction=0.75),
    model=dict(
        seq_len=48,
        embed_dim=48,
        n_layers=1,
        n_heads=4,
        ff_dim=192,
        attention_dropout=0.0,
        residual_dropout=0.0,
        recency_bias=True,
        learning_rate=3e-3,
        min_learning_rate=1.5e-4,
        n_updates=500,
        batch_size=32,
        max_history_steps=None,
    ),
)

#: :data:`NOISY_ROOM` with a context of 20 episodes (160 transitions): the same room, goals and split.
#: Each history is 20 episodes from scratch in which epsilon stays 1 until the expert first steps on
#: the goal and then falls to 0 over 20 steps (``anneal_after_reward``): a clock-driven schedule over
#: 20 episodes taught a model to stop exploring at the clock's end, found goal or not (benchmarks/ad/README.md).
#: 2 layers, embedding 64, batch 16, 80 histories per goal and 5,000 updates: the whole pipeline takes about
#: 16 minutes on one CPU core and reaches 91% of the optimal return at episode 20 (benchmarks/ad/README.md).
NOISY_ROOM_20: dict[str, Any] = dict(
    room=dict(NOISY_ROOM["room"]),
    n_test=NOISY_ROOM["n_test"],
    episodes=20,
    learner="noisy_expert",
    learners_per_goal=80,
    learner_kwargs=dict(anneal_fraction=0.125, anneal_after_reward=True),
    model=dict(
        seq_len=160,
        embed_dim=64,
        n_layers=2,
        n_heads=4,
        ff_dim=256,
        attention_dropout=0.0,
        residual_dropout=0.0,
        recency_bias=True,
        learning_rate=2e-3,
        min_learning_rate=1e-4,
        n_updates=5000,
        batch_size=16,
        max_history_steps=None,
    ),
)


def short_histories(
    goals: Sequence[Goal],
    preset: dict[str, Any] = NOISY_ROOM,
    learners_per_goal: int = 0,
    seed: int = 0,
) -> Histories:
    """
    Many short from-scratch histories per goal, each ``episodes x episode_length`` steps, in memory
    (:func:`~sb3_pref.ad.collect.collect_histories` writes long ones to disk, resumably).

    :param goals: the training goals
    :param preset: a setting shaped like :data:`NOISY_ROOM`
    :param learners_per_goal: histories per goal (0: the preset's)
    :param seed: learner ``k`` of goal number ``g`` uses seed ``seed + 1000 * k + g``
    :return: ``len(goals) x learners_per_goal`` histories, learner by learner
    """
    if not goals:
        raise ValueError("goals must hold at least one goal")
    n = learners_per_goal or preset["learners_per_goal"]
    steps = preset["episodes"] * preset["room"]["episode_length"]
    parts = [
        record_learner(
            goal,
            preset["learner"],
            steps,
            seed + 1000 * k + g,
            env_kwargs=preset["room"],
            learner_kwargs=preset["learner_kwargs"],
        )
        for k in range(n)
        for g, goal in enumerate(goals)
    ]
    return Histories.concatenate(parts)
