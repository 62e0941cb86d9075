"""
Fine-tune a policy that already works from a *new* preference, with and without a KL penalty to it.

1. A PPO policy is trained on the task's own reward (dm_control ``walker_stand`` by default), or
   loaded with ``--base model.zip``.
2. A new preference the task reward does not express: *less control effort* (a gentler walker).
   A scripted teacher judges pairs of segments by ``-mean(a_t ** 2)`` summed over the segment, not
   by the task reward (:class:`EffortTeacher`).
3. ``PPO_REWARD`` starts from the base policy and learns a reward model from that teacher, twice:
   with the RLHF preset (KL penalty to the base policy, adaptive coefficient) and with the same
   settings but ``kl_coef=0`` (the KL is still measured and logged, it just costs nothing).
4. Each policy is evaluated on the new preference, the task return and its KL to the base policy;
   the results go to ``results.json``, a Markdown table and a figure.

Quick check (a minute or two, not a measurement: four policy updates, enough for the two fine-tuned rows to part from
the base and from each other)::

    python examples/finetune_with_preferences.py --base-steps 2048 --finetune-steps 8192 --max-feed 40 --eval-episodes 1

The committed measurements, each with its command: ``benchmarks/rlhf/README.md``. Three seeds at the defaults::

    python examples/finetune_with_preferences.py --seeds 1 2 3 --output-dir runs/rlhf
"""

import argparse
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import sb3_pref  # noqa: F401  (registers the dm_control ids)
from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.rlhf import RLHF_PRESET, load_reference_policy
from sb3_pref.core.teachers import RewardSegments, ScriptedTeacher

NET = {"net_arch": [64, 64]}
PPO_SETTINGS: dict[str, Any] = dict(n_steps=512, batch_size=256, n_epochs=10, gae_lambda=0.95, gamma=0.99)


def effort_score(actions: np.ndarray) -> np.ndarray:
    """The new preference per step: ``-mean(a ** 2)`` over action dimensions (0 is best)."""
    return -np.square(actions).mean(axis=-1)


class EffortTeacher(ScriptedTeacher):
    """A rational scripted teacher that prefers the segment with less control effort, ignoring the task reward."""

    def label_pairs(self, seg_0: RewardSegments, seg_1: RewardSegments) -> np.ndarray:
        # The segments hold the executed (clipped) actions: the effort the walker actually spends.
        return self.label(effort_score(seg_0.actions), effort_score(seg_1.actions))


def train_base(env_id: str, steps: int, seed: int, path: str) -> str:
    """PPO on the task's reward; :return: the saved model's path."""
    model = PPO("MlpPolicy", make_vec_env(env_id, n_envs=4, seed=seed), policy_kwargs=NET, seed=seed, **PPO_SETTINGS)
    model.learn(steps)
    model.save(path)
    return path


def finetune(
    env_id: str,
    base_path: str,
    use_kl: bool,
    steps: int,
    seed: int,
    max_feed: int,
    learning_rate: float,
    kl_coef: Optional[float] = None,
    kl_target: Optional[float] = None,
) -> PPO_REWARD:
    """
    PPO_REWARD from the base policy's weights, the RLHF preset, the effort teacher.

    :param use_kl: False sets ``kl_coef=0`` (and no adaptation), everything else identical
    :param learning_rate: the policy's starting lr (the preset anneals it to 0 over ``steps``)
    :param kl_coef: the (starting) KL coefficient; None keeps the preset's
    :param kl_target: the adaptive controller's target; None keeps the preset's, 0 fixes ``kl_coef``
    """
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    # rounds of 50 labels (a budget under 100 asks two rounds of half of it, so a small --max-feed still runs)
    round_size = min(50, max(1, max_feed // 2))
    reward_model = RewardModel(
        env.observation_space, env.action_space, size_segment=50, mb_size=round_size, hidden_dim=64, seed=seed
    )
    options = dict(RLHF_PRESET)
    # benchmarks/rlhf/README.md was measured before the clipped value loss joined the preset: SB3's value loss
    # keeps this script reproducing it (the preset's clip_range_vf=0.2 would also bound the value head,
    # zero at the start, to 0.2 of movement per rollout against returns of tens).
    options.update(value_loss="sb3", clip_range_vf=None)
    if kl_coef is not None:
        options["kl_coef"] = kl_coef
    if kl_target is not None:
        options["kl_target"] = kl_target or None
    if not use_kl:
        options.update(kl_coef=0.0, kl_target=None)
    model = PPO_REWARD(
        "MlpPolicy",
        env,
        reward_model=reward_model,
        teacher=EffortTeacher(seed=seed),
        reference_policy=base_path,
        num_interaction=2048,  # a query round every rollout (4 envs x 512 steps)
        max_feed=max_feed,
        unsuper_flag=0,
        policy_kwargs=NET,
        seed=seed,
        learning_rate=learning_rate,
        **PPO_SETTINGS,
        **options,
    )
    # Start from the base policy (the reference is a frozen copy of the same weights).
    model.policy.load_state_dict(PPO.load(base_path, device="cpu").policy.state_dict())
    model.learn(steps)
    return model


def evaluate(policy: Any, reference: Any, env_id: str, episodes: int, seed: int) -> dict[str, float]:
    """
    Stochastic rollouts (the policy as it is trained and as the KL penalty sees it).

    :return: mean episode task return, mean per-step effort score, mean per-step KL(pi || pi_ref)
        at the visited states (exact Gaussian KL, not the sampled estimate)
    """
    n_envs = min(episodes, 4)
    env = make_vec_env(env_id, n_envs=n_envs, seed=10_000 + seed)
    obs = env.reset()
    returns, current = [], np.zeros(n_envs)
    efforts, kls = [], []
    generator = th.Generator().manual_seed(seed)
    while len(returns) < episodes:
        with th.no_grad():
            obs_t = th.as_tensor(obs, dtype=th.float32)
            dist = policy.get_distribution(obs_t).distribution
            ref = reference.get_distribution(obs_t).distribution
            kls.append(th.distributions.kl_divergence(dist, ref).sum(-1).numpy())
            noise = th.randn(dist.mean.shape, generator=generator)
            actions = np.clip((dist.mean + dist.stddev * noise).numpy(), -1.0, 1.0)
        efforts.append(effort_score(actions))
        obs, rewards, dones, _ = env.step(actions)
        current += rewards
        for index in np.flatnonzero(dones):
            returns.append(float(current[index]))
            current[index] = 0.0
    env.close()
    return {
        "task_return": float(np.mean(returns[:episodes])),
        "effort": float(np.mean(efforts)),
        "kl": float(np.mean(kls)),
    }


def summarise(results: list[dict[str, Any]]) -> str:
    """Markdown table: mean and standard deviation over seeds per condition."""
    lines = [
        "| policy | seeds | task return | effort score (higher = gentler) | KL to base (nats/step) |",
        "|---|---|---|---|---|",
    ]
    for condition in ("base", "no KL", "with KL"):
        rows = [row for row in results if row["condition"] == condition]
        cells = []
        for key in ("task_return", "effort", "kl"):
            values = np.array([row[key] for row in rows])
            digits = 1 if key == "task_return" else 3
            cells.append(f"{values.mean():.{digits}f} ± {values.std():.{digits}f}")
        lines.append(f"| {condition} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: str) -> None:
    """Three panels side by side: effort score, task return, KL; one bar per condition, one dot per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conditions = ("base", "no KL", "with KL")
    panels = (
        ("effort", "new preference: effort score\n(higher = gentler)"),
        ("task_return", "task return"),
        ("kl", "KL to base (nats/step)"),
    )
    figure, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for axis, (key, title) in zip(axes, panels):
        for position, condition in enumerate(conditions):
            values = [row[key] for row in results if row["condition"] == condition]
            axis.bar(position, np.mean(values), color=f"C{position}", alpha=0.6)
            axis.scatter([position] * len(values), values, color="black", s=12, zorder=3)
        axis.set_xticks(range(len(conditions)), conditions)
        axis.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """:param argv: command-line arguments (default: ``sys.argv[1:]``); :return: one result row per policy"""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="walker_stand", help="a dm_control id (B-Pref naming)")
    parser.add_argument("--base", default=None, help="a PPO model.zip trained on the task reward (trained here if absent)")
    parser.add_argument("--base-steps", type=int, default=100_000)
    parser.add_argument("--finetune-steps", type=int, default=16_384)
    parser.add_argument("--finetune-lr", type=float, default=1e-3, help="policy lr at the start of fine-tuning")
    parser.add_argument("--max-feed", type=int, default=400)
    parser.add_argument("--kl-coef", type=float, default=None, help="(starting) KL coefficient; default: the preset's")
    parser.add_argument(
        "--kl-target", type=float, default=None, help="adaptive target; 0: fixed kl_coef; default: the preset's"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--output-dir", default="runs/finetune_with_preferences")
    args = parser.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    th.set_num_threads(1)
    started = time.time()
    base_path = args.base or train_base(args.env, args.base_steps, 0, os.path.join(args.output_dir, "base.zip"))
    base = load_reference_policy(base_path)
    results = []
    for seed in args.seeds:
        results.append({"condition": "base", "seed": seed, **evaluate(base, base, args.env, args.eval_episodes, seed)})
        for condition, use_kl in (("no KL", False), ("with KL", True)):
            model = finetune(
                args.env,
                base_path,
                use_kl,
                args.finetune_steps,
                seed,
                args.max_feed,
                args.finetune_lr,
                args.kl_coef,
                args.kl_target,
            )
            row = {"condition": condition, "seed": seed, "final_kl_coef": model.kl_coef}
            row.update(evaluate(model.policy, base, args.env, args.eval_episodes, seed))
            results.append(row)
            print(json.dumps(row), flush=True)
    table = summarise(results)
    print(table)
    print(f"wall time {time.time() - started:.0f} s")
    with open(os.path.join(args.output_dir, "results.json"), "w") as file:
        json.dump({"args": vars(args), "results": results}, file, indent=1)
    with open(os.path.join(args.output_dir, "table.md"), "w") as file:
        file.write(table + "\n")
    plot(results, os.path.join(args.output_dir, "finetune.png"))
    return results


if __name__ == "__main__":
    main()
