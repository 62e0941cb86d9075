"""
What the learned reward rewards on dm_control's cartpole, round by round (benchmarks/quality_grid/README.md, cartpole_swingup).

Two measurements, both on a run of a grid config (the same spec, seed and code path as the grid's run):

- ``reward-rounds``: trains the run and, at every query round, correlates the reward model's prediction on the rollout
  just collected with the true reward and with the state's features: the pole's uprightness ``(cos + 1) / 2``,
  ``|angular velocity|``, ``|cart position|``, ``|cart velocity|`` and ``|action|``; also the rollout's mean of
  them (what the policy does) and the prediction before and after the refit (how far a round moves the reward).
- ``reward-first-round``: stops at the first query round, then fits fresh reward models offline on pairs labelled by the
  run's teacher from the pretraining data, with raw and with standardised inputs (``RewardModel(input_norm=...)``),
  and reports the same correlations on every pretraining transition.

    python -m benchmarks quality_grid reward-rounds benchmarks/quality_grid/quality_front.yaml \\
        prefppo/cartpole_swingup/oracle/1000x100/seed0 --steps 120000 \\
        --out benchmarks/quality_grid/results/quality/probe/front_1000_seed0.jsonl
    python -m benchmarks quality_grid reward-first-round benchmarks/quality_grid/quality.yaml \\
        prefppo/cartpole_swingup/oracle/1000x50/seed0
"""

import argparse
import json
import tempfile
from typing import Any, Optional

import numpy as np
import torch as th

from benchmarks.study import Option, probe
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.experiments.config import load_config
from sb3_pref.experiments.ppo_runs import build_bpref


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")


def cartpole_features(obs: np.ndarray, actions: np.ndarray) -> dict[str, np.ndarray]:
    """dm_control cartpole's flat observation: cart position, pole cos, pole sin, cart velocity, angular velocity."""
    return {
        "upright": (obs[:, 1] + 1) / 2,
        "angvel": np.abs(obs[:, 4]),
        "cart": np.abs(obs[:, 0]),
        "cartvel": np.abs(obs[:, 3]),
        "action": np.abs(actions).mean(-1),
    }


def profile(predicted: np.ndarray, true: np.ndarray, obs: np.ndarray, actions: np.ndarray) -> dict[str, float]:
    """Correlations of a prediction with the true reward and the features; the features' means."""
    features = cartpole_features(obs, actions)
    row = {"corr_true": correlation(predicted, true)}
    row.update({f"pred~{name}": correlation(predicted, value) for name, value in features.items()})
    row.update({f"true~{name}": correlation(true, value) for name, value in features.items()})
    row.update({f"mean_{name}": float(value.mean()) for name, value in features.items()})
    return row


def build(config: str, run_id: str) -> Any:
    runs = {run.run_id: run for run in load_config(config).runs()}
    if run_id not in runs:
        raise SystemExit(f"{run_id!r} is not a run of {config}: {sorted(runs)[:4]} ...")
    return build_bpref(runs[run_id], tempfile.mkdtemp(), None)


def probe_rounds(config: str, run_id: str, steps: int, out: Optional[str]) -> None:
    model = build(config, run_id)
    learner = model.pref_learner
    rollout: dict[str, np.ndarray] = {}
    add_transitions, query_round = learner.add_transitions, learner.query_round

    def recording_add(obs, actions, rewards, dones, extras=None):
        rollout.update(obs=obs.reshape(-1, obs.shape[-1]), actions=actions.reshape(-1, actions.shape[-1]))
        rollout["true"] = rewards.ravel()
        return add_transitions(obs, actions, rewards, dones, extras=extras)

    def probing_round(method=None):
        before = learner.predict_rewards(rollout["obs"], rollout["actions"])
        stats = query_round(method)
        after = learner.predict_rewards(rollout["obs"], rollout["actions"])
        returns = [episode["r"] for episode in model.ep_info_buffer]
        row = {"step": model.num_timesteps, "labels": learner.total_feed}
        row["train_return"] = float(np.mean(returns)) if returns else None
        row.update(corr_before_after=correlation(before, after), mean_shift=float(after.mean() - before.mean()))
        row["std_after"] = float(after.std())
        row.update(profile(after, rollout["true"], rollout["obs"], rollout["actions"]))
        line = json.dumps({key: round(value, 3) if isinstance(value, float) else value for key, value in row.items()})
        print(line, flush=True)
        if out:
            with open(out, "a") as file:
                file.write(line + "\n")
        return stats

    learner.add_transitions, learner.query_round = recording_add, probing_round
    model.learn(steps)


def first_round(config: str, run_id: str, labels: int, model_seeds: int) -> None:
    model = build(config, run_id)
    learner = model.pref_learner

    class FirstRound(Exception):
        pass

    def stop(method=None):
        raise FirstRound

    learner.query_round = stop
    try:
        model.learn(10**9)
    except FirstRound:
        pass
    obs, actions, true = learner.store.last_transitions(len(learner.store))
    rng = np.random.default_rng(0)
    seg_0 = learner.store.sample(labels, learner.size_segment, rng)
    seg_1 = learner.store.sample(labels, learner.size_segment, rng)
    dataset = type("Pairs", (), {"__len__": lambda self: len(self.labels)})()
    dataset.features_0, dataset.features_1 = seg_0.features, seg_1.features
    dataset.labels = np.asarray(learner.teacher.label_pairs(seg_0, seg_1), dtype=np.float32)
    features = np.concatenate([obs, actions], -1)
    print(f"{len(true)} pretraining transitions, {labels} labelled pairs")
    for input_norm in (False, True):
        for seed in range(model_seeds):
            encoder = learner.reward_model.encoder
            reward_model = RewardModel(
                encoder.observation_space, encoder.action_space, size_segment=learner.size_segment, seed=seed,
                input_norm=input_norm, device="cpu",
            )  # fmt: skip
            RewardTrainer(reward_model).fit(dataset, np.random.default_rng(seed), max_epochs=50)
            row = profile(reward_model.predict(features)[0], true, obs, actions)
            keys = ("corr_true", "pred~upright", "pred~angvel", "true~upright", "true~angvel")
            shown = {key: round(row[key], 2) for key in keys}
            print(json.dumps({"input_norm": input_norm, "model_seed": seed, **shown}))


#: the run both measurements start from
RUN = (
    Option("config", "a grid config (YAML)"),
    Option("run_id", "a prefppo run of it on a dm_control cartpole task"),
)


@probe(
    "reward-rounds",
    "what the learned reward rewards on cartpole, correlated at every query round of a grid's run",
    *RUN,
    Option("--steps", "env steps to train", type=int, default=120_000),
    Option("--out", "append each round's row to this JSON-lines file"),
)
def reward_rounds(args: argparse.Namespace) -> None:
    """
    Train the run; at each round, the prediction's correlations with the true reward and the state's features.

    :param args: the options
    """
    th.set_num_threads(1)
    probe_rounds(args.config, args.run_id, args.steps, args.out)


@probe(
    "reward-first-round",
    "fresh reward models fit offline on a run's pretraining data, with raw and standardised inputs",
    *RUN,
    Option("--labels", "labelled pairs", type=int, default=100),
    Option("--model-seeds", "reward models per setting", type=int, default=3),
)
def reward_first_round(args: argparse.Namespace) -> None:
    """
    Stop the run at its first query round, fit reward models on its teacher's labels, report the correlations.

    :param args: the options
    """
    th.set_num_threads(1)
    first_round(args.config, args.run_id, args.labels, args.model_seeds)
