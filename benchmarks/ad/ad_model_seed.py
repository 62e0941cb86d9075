"""
How much does AD's in-context curve depend on the model's own seed? ``train_AD.py --seed`` seeds the goal split, the
learners, the views and the model together, so a second model on the same histories and held-out trials needs this
script: it rebuilds a finished run's first-success views and trains a model with another seed for the views and
weights, then plays the run's 230 held-out trials (the split and trial seed stay the run's), sampling actions and
taking the most likely ones (benchmarks/ad/README.md, sixth run).

    OMP_NUM_THREADS=1 python -m benchmarks ad model-seed runs/ad_dqn_room --model-seed 1 --out runs/ad_dqn_room_seed1

``python benchmarks/ad/ad_model_seed.py RUN --model-seed 1 --out DIR`` still works: jobs run it so.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from sb3_pref.ad import Histories, first_success_views
from sb3_pref.rl2.evaluation import evaluate_adaptation

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import train_AD  # a script, not part of the package

# run by path (python benchmarks/ad/ad_model_seed.py, as jobs do), the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.study import Option, probe, run_script


@probe(
    "model-seed",
    "a second AD model on a finished run's histories and held-out trials, with another seed for views and weights",
    Option("run", "a finished train_AD.py output folder (its args.json and histories.npz)"),
    Option("--model-seed", type=int, default=1),
    Option("--out", "folder for the new model.zip and seed.json", required=True),
)
def model_seed(options: argparse.Namespace) -> None:
    """
    Rebuild the run's first-success views with the model's seed, train, and play its held-out trials both ways.

    :param options: the options
    """
    with open(os.path.join(options.run, "args.json")) as handle:
        args = argparse.Namespace(**json.load(handle))
    if not args.first_success_views or args.shuffled:
        raise ValueError(f"{options.run} is not an ordered first-success-views run; this script rebuilds only those views")
    os.makedirs(options.out, exist_ok=True)
    args.output_dir = options.out
    histories = Histories.load(os.path.join(options.run, "histories.npz"))
    rng = np.random.default_rng(options.model_seed)
    data = first_success_views(histories, args.first_success_views, args.tail_episodes, args.tail_window, rng)
    split_seed, args.seed = args.seed, options.model_seed  # train_ad seeds the model with args.seed
    start = time.perf_counter()
    model = train_AD.train_ad(args, data, float("inf"))
    model_s = time.perf_counter() - start
    args.seed = split_seed  # the run's own held-out goals and trials
    env = train_AD.held_out_trials(args)
    curves = {}
    for name, deterministic in (("sampled", False), ("greedy", True)):
        result = evaluate_adaptation(model, env, args.eval_trials, deterministic=deterministic, seed=split_seed)
        curves[name] = result.summary()["mean"].round(3).tolist()
        print(f"{name:>8}: " + " ".join(f"{m:.2f}" for m in curves[name]), flush=True)
    with open(os.path.join(options.out, "seed.json"), "w") as handle:
        json.dump(dict(run=options.run, model_seed=options.model_seed, model_s=model_s, curves=curves), handle, indent=1)


if __name__ == "__main__":
    run_script(model_seed)
