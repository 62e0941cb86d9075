"""
Record the learning histories of one source learner per DarkRoom training goal.

    python -m sb3_pref.ad --out runs/ad/histories.npz                       # the seed: A2C, 2.5M steps, 800k kept
    python -m sb3_pref.ad --out h.npz --learner qlearning --steps 4000      # a cheap, quick run

Each goal's history is written to ``<out>.parts/`` when it is done; rerunning the same command
skips the goals already there, then writes the merged ``<out>``.
"""

import argparse
import json
import time
from typing import Optional

from sb3_pref.ad.collect import LEARNERS, collect_histories
from sb3_pref.envs.darkroom import AD_TEST_GOALS, split_goals


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sb3_pref.ad", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="the merged .npz to write")
    parser.add_argument("--learner", choices=LEARNERS, default="a2c")
    parser.add_argument("--steps", type=int, default=2_500_000, help="env steps per learner (the seed: 2.5M)")
    parser.add_argument("--max-steps", type=int, default=800_000, help="transitions kept per history (the seed: 800k)")
    parser.add_argument("--learners-per-goal", type=int, default=1)
    parser.add_argument("--n-envs", type=int, default=10, help="parallel envs of an A2C learner")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--episode-length", type=int, default=20)
    parser.add_argument(
        "--no-terminate-on-goal", action="store_true", help="the reward-per-step variant instead of the seed's"
    )
    parser.add_argument("--n-test", type=int, default=AD_TEST_GOALS, help="held-out goals (the seed: 23 of 80)")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learner-kwargs", type=json.loads, default={}, help="JSON, e.g. '{\"epsilon\": 0.1}'")
    parser.add_argument("--goals", type=int, default=None, help="use only the first N training goals (quick runs)")
    parser.add_argument("--workers", type=int, default=1, help="learners recorded in parallel processes")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    args = parse_args(argv)
    train, _ = split_goals(args.split_seed, size=args.size, n_test=args.n_test)
    goals = train[: args.goals] if args.goals else train
    env_kwargs = dict(size=args.size, episode_length=args.episode_length, terminate_on_goal=not args.no_terminate_on_goal)
    start = time.perf_counter()
    histories = collect_histories(
        goals,
        args.out,
        learner=args.learner,
        steps=args.steps,
        learners_per_goal=args.learners_per_goal,
        seed=args.seed,
        n_envs=args.n_envs,
        max_steps=args.max_steps,
        env_kwargs=env_kwargs,
        learner_kwargs=args.learner_kwargs,
        verbose=1,
        workers=args.workers,
    )
    sizes = f"{histories.n_histories} histories x {histories.min_length}-{histories.length} steps"
    print(f"{sizes} -> {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
