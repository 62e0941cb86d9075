"""
RL2 on DarkRoom: train on the training goals, then report the mean return per episode index of a
4-episode trial on held-out goals, against the optimal return and a random policy.

    nice -n 10 python -m benchmarks rl2 darkroom --output-dir runs/rl2_darkroom
    nice -n 10 python -m benchmarks rl2 darkroom --eval-only runs/rl2_darkroom/model.zip --output-dir runs/eval

Runs on one CPU thread. Prints a markdown table (copied into benchmarks/rl2/README.md) and writes
``progress.csv`` (the SB3 log, with ``rollout/return_ep{k}``), ``adaptation.csv`` and ``adaptation.png``.

Two references besides the optimal return (which knows the goal) and a random policy:

- an upper bound for any policy when the goal is uniform over ``m`` cells: an episode visits at most
  20 new cells, so the goal is found before episode ``k`` with probability at most ``20 k / m``
  (then the return is at most 20), and an episode that searches ``m - 20 k`` unvisited cells earns
  at most ``sum_t (21 - t) / (m - 20 k) = 210 / (m - 20 k)``;
- a scripted searcher: one fixed 20-step path per episode (beam search for the most expected
  return over the goals not yet covered), and straight to the goal once seen. Its paths are planned
  either for all 80 cells or for the training goals only; the latter is what a policy that is
  optimal on the training goals does, and it almost never visits a held-out goal.
"""

import argparse
import json
import os
import time
from typing import Optional

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from benchmarks.study import Option, probe, shared
from sb3_pref.envs.darkroom import Goal, all_goals, darkroom_trials, split_goals
from sb3_pref.experiments.rl2_runs import make_rl2_model
from sb3_pref.rl2 import RL2
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv


def plan_search(goals: list[Goal], episodes: int, length: int = 20, beam: int = 1000) -> list[tuple[Goal, ...]]:
    """One path per episode, each the beam-search best at collecting reward on the goals still uncovered."""
    centre, moves, paths, left = (4, 4), ((0, 1), (0, -1), (-1, 0), (1, 0)), [], set(goals)
    for _ in range(episodes):
        beams = [(0.0, centre, frozenset([centre]), ())]
        for step in range(1, length + 1):
            best: dict = {}
            for score, (x, y), visited, path in beams:
                for dx, dy in moves:
                    cell = (min(max(x + dx, 0), 8), min(max(y + dy, 0), 8))
                    gain = length + 1 - step if cell in left and cell not in visited else 0
                    key = (cell, visited | {cell})
                    if key not in best or best[key][0] < score + gain:
                        best[key] = (score + gain, cell, key[1], (*path, cell))
            beams = sorted(best.values(), key=lambda b: (-b[0], -len(b[2])))[:beam]
        paths.append(beams[0][3])
        left -= set(beams[0][3])
    return paths


def scripted_returns(paths: list[tuple[Goal, ...]], goals: list[Goal], length: int = 20) -> np.ndarray:
    """Mean return per episode of following ``paths`` until the goal is seen, then going straight to it."""
    returns = np.zeros((len(goals), len(paths)))
    for row, goal in enumerate(goals):
        found = False
        for episode, path in enumerate(paths):
            if found:
                returns[row, episode] = length + 1 - abs(goal[0] - 4) - abs(goal[1] - 4)
            elif goal in path:
                returns[row, episode] = length - path.index(goal)
                found = True
    return returns.mean(axis=0)


def uniform_goal_bound(n_goals: int, episodes: int, length: int = 20) -> np.ndarray:
    """Upper bound on the expected return per episode index when the goal is uniform over n_goals cells."""
    bound = []
    for k in range(episodes):
        unseen = n_goals - length * k
        found = min(length * k / n_goals, 1.0)
        bound.append(found * length + (length * (length + 1) / 2 / unseen if unseen > 0 else 0.0) * (1 - found))
    return np.array(bound)


def table(results: dict, references: dict, optimal: float) -> str:
    """Markdown table: agents with 95% intervals, then reference curves, then the optimal return."""
    stats = {name: result.summary("returns") for name, result in results.items()}
    lines = [
        "| episode | " + " | ".join(results) + " | " + " | ".join(references) + " | optimal |",
        "|---" * (2 + len(results) + len(references)) + "|",
    ]
    for k in range(next(iter(results.values())).episodes_per_trial):
        cells = [
            f"{stats[n]['mean'][k]:.2f} ({stats[n]['low'][k]:.2f}-{stats[n]['high'][k]:.2f}), "
            f"{100 * stats[n]['mean'][k] / optimal:.0f}%"
            for n in results
        ]
        cells += [f"{curve[k]:.2f}, {100 * curve[k] / optimal:.0f}%" for curve in references.values()]
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {optimal:.2f} |")
    return "\n".join(lines)


def train(args: argparse.Namespace, env_kwargs: dict) -> tuple[RL2, Optional[float]]:
    train_env = make_vec_env(darkroom_trials, n_envs=args.n_envs, seed=args.seed, env_kwargs=dict(split="train", **env_kwargs))
    settings = {key: getattr(args, key) for key in ("cell", "n_steps", "batch_size", "n_epochs", "ent_coef", "gamma")}
    settings.update(lr=args.learning_rate, gae_lambda=args.gae_lambda, hidden_size=args.hidden_size)
    model = make_rl2_model(settings, train_env, args.seed)  # the grid runner's RL2, as in examples/train_RL2.py
    model.set_logger(configure(args.output_dir, ["csv"]))
    start = time.perf_counter()
    model.learn(args.total_timesteps, log_interval=10)
    seconds = time.perf_counter() - start
    model.save(os.path.join(args.output_dir, "model"))
    return model, seconds


@probe(
    "darkroom",
    "RL2 trained on DarkRoom's training goals, then its return per episode of a trial on held-out goals",
    # in this order: summary.json records the options as they are parsed
    shared("total_timesteps", default=8_000_000),
    Option("--n-envs", type=int, default=32),
    Option("--n-steps", type=int, default=160),
    Option("--batch-size", type=int, default=1280),
    Option("--n-epochs", type=int, default=4),
    Option("--learning-rate", type=float, default=1e-3),
    Option("--ent-coef", type=float, default=0.03),
    Option("--gamma", type=float, default=0.99),
    Option("--gae-lambda", type=float, default=0.95),
    Option("--hidden-size", type=int, default=128),
    Option("--cell", choices=["lstm", "gru"], default="gru"),
    Option("--observation", choices=["xy", "onehot"], default="xy"),
    Option("--episodes-per-trial", type=int, default=4),
    Option("--eval-trials", type=int, default=1000),
    shared("seed"),
    Option("--split-seed", type=int, default=0),
    shared("output_dir", default="runs/rl2_darkroom"),
    Option("--eval-split", "goals to evaluate on", choices=["test", "train", "all"], default="test"),
    Option("--eval-only", "evaluate this saved model instead of training"),
)
def darkroom(args: argparse.Namespace) -> None:
    """
    Train (or load ``--eval-only``), evaluate against the optimal return, a random policy and two scripted searches;
    the table is printed, the files go to ``--output-dir``.

    :param args: the options
    """
    th.set_num_threads(1)
    os.makedirs(args.output_dir, exist_ok=True)
    env_kwargs = dict(episodes_per_trial=args.episodes_per_trial, split_seed=args.split_seed, observation=args.observation)
    if args.eval_only:
        model, seconds = RL2.load(args.eval_only, device="cpu"), None
    else:
        model, seconds = train(args, env_kwargs)
    test_env = make_vec_env(
        darkroom_trials, n_envs=20, seed=args.seed + 10_000, env_kwargs=dict(split=args.eval_split, **env_kwargs)
    )
    results = {
        "RL2 stochastic": evaluate_adaptation(model, test_env, args.eval_trials, deterministic=False, seed=1),
        "RL2 deterministic": evaluate_adaptation(model, test_env, args.eval_trials, deterministic=True, seed=1),
        "random": evaluate_adaptation(RandomAgent(test_env.action_space, seed=0), test_env, args.eval_trials, seed=1),
    }
    train_goals, test_goals = split_goals(args.split_seed)
    eval_goals = {"train": train_goals, "test": test_goals, "all": all_goals()}[args.eval_split]
    k = args.episodes_per_trial
    all_cells_paths = plan_search(all_goals(), k)
    references = {
        "search planned on all cells": scripted_returns(all_cells_paths, eval_goals),
        "search planned on train goals": scripted_returns(plan_search(train_goals, k), eval_goals),
    }
    bound = ", ".join(f"{b:.2f}" for b in uniform_goal_bound(80, k))
    search = ", ".join(f"{b:.2f}" for b in scripted_returns(all_cells_paths, all_goals()))
    footnote = (
        f"Goal uniform on all 80 cells (optimal 16.50): upper bound for any policy per episode {bound}; "
        f"the search planned on all cells gets {search}."
    )
    optimal = float(np.mean([21 - abs(x - 4) - abs(y - 4) for x, y in eval_goals]))
    report = table(results, references, optimal)
    timing = "evaluation only"
    if seconds is not None:
        rate = args.total_timesteps / seconds
        timing = f"{args.total_timesteps} steps in {seconds / 60:.1f} min on 1 thread ({rate:.0f} steps/s)"
    header = (
        f"DarkRoom 9x9, {len(eval_goals)} {args.eval_split} goals (split seed {args.split_seed}), {args.eval_trials} trials "
        f"of {k} episodes; {timing}. Cells: mean (95% CI), % of optimal."
    )
    print(header)
    print(report)
    print(footnote)
    write_adaptation_csv(os.path.join(args.output_dir, "adaptation.csv"), results)
    plot_adaptation(
        {name: results[name] for name in ("RL2 stochastic", "random")},
        os.path.join(args.output_dir, "adaptation.png"),
        optimal=optimal,
        title=f"RL2 on DarkRoom ({args.eval_split} goals)",
    )
    with open(os.path.join(args.output_dir, "summary.json"), "w") as handle:
        summary = {"args": vars(args), "train_seconds": seconds, "header": header, "table": report, "footnote": footnote}
        json.dump(summary, handle, indent=1)
