"""
Why SAC_REWARD stalls near 450 on walker_stand (issue 41's SAC bar; ``README.md``, "Not measured here"): is the
learned reward holding the policy there, or is the policy stuck under a reward that already prefers standing?

Two runs of a seed that stalled (``--arm defaults``: SAC_REWARD at its defaults, planned for ``run.py``'s 100k steps
and 1000 labels, stopped at ``--steps``; ``--arm sac``: SB3's SAC on the true reward, to the same step), each saved;
then ``look`` plays both policies and scores every step twice, by the true reward and by the stalled run's own reward
model, with the walker's torso height and uprightness (dm_control's ``torso_height`` and ``torso_upright``).

    python -m benchmarks defaults stall --arm defaults --seed 104 --steps 50000   # one per core, side by side
    python -m benchmarks defaults stall --arm sac --seed 104 --steps 50000
    python -m benchmarks defaults stall_look --seed 104                           # writes stall/seed<N>.json
    python -m benchmarks defaults stall --arm rune --seed 0 --steps 50000         # RUNE's bonus at the stall's step

If the stalled run's reward scores SAC's standing episodes above its own, the reward is right and the policy does not
find what it pays for (an exploration or optimisation problem); if it scores them lower, the labels taught it to pay for
the stall.
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
STALL = HERE / "stall"
#: the models are large and rebuilt by the runs: kept out of the repository
MODELS = Path("/tmp/sb3_pref_stall")
from benchmarks.study import Option, probe, run_script, shared, write_json  # noqa: E402

TASK = "walker_stand-sac"
#: evaluation episodes per policy
EPISODES = 5


@probe(
    "stall",
    "one walker_stand run of SAC_REWARD at its defaults, or of SAC, stopped at --steps and saved",
    Option(
        "--arm",
        "defaults (SAC_REWARD), rune (its defaults with RUNE's PEBBLE settings), window_two_thirds (its "
        "plan with labels until two thirds of the run) or sac (the true reward)",
        choices=["defaults", "rune", "window_two_thirds", "sac"],
        default="defaults",
    ),
    Option("--steps", "stop after this many env steps (the plan is made for the task's 100k)", type=int, default=50_000),
    shared("seed"),
    environ={"MUJOCO_GL": "osmesa"},
)
def stall(args: argparse.Namespace) -> None:
    """Train, stop at ``--steps``, save the model (SAC_REWARD's carries its reward model and labels); the return and
    CPU seconds go to ``stall/runs/<arm>/seed<N>.json``."""
    import torch as th
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    from benchmarks.defaults.run import TASKS, evaluate, make_env, plan_window
    from benchmarks.defaults.settings import ARMS
    from sb3_pref import SAC_REWARD, RewardModel

    th.set_num_threads(1)
    spec = TASKS[TASK]
    env, eval_env = make_env(TASK, 1, args.seed), make_env(TASK, 1, args.seed + 1000)
    # the probe's arms are run.py's: RUNE's PEBBLE settings (rune_pebble), the labels until two thirds of the run
    extra = dict(ARMS[{"rune": "rune_pebble", "window_two_thirds": "label_window_two_thirds"}.get(args.arm, "defaults")])
    label_window = extra.pop("label_window", None)
    if args.arm == "sac":
        model: Any = SAC("MlpPolicy", env, seed=args.seed, verbose=0)
    else:
        model = SAC_REWARD(
            "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space), teacher="oracle",
            max_feed=spec["labels"], seed=args.seed, verbose=0, **extra,
        )  # fmt: skip
    stop_at = int(args.steps)

    class StopAt(BaseCallback):
        def _on_step(self) -> bool:
            return self.num_timesteps < stop_at

    cpu = time.process_time()
    # planned for the whole run, as run.py's runs were; the window arm asks its labels until two thirds of it, so the
    # states of a policy that has begun to stand get labelled too (the stall is a coverage gap in the labels)
    with plan_window(label_window):
        model.learn(spec["steps"], callback=StopAt())
    cpu = time.process_time() - cpu
    MODELS.mkdir(parents=True, exist_ok=True)
    model.save(MODELS / f"{args.arm}_seed{args.seed}")
    final = evaluate(model, eval_env, 5)
    result = dict(arm=args.arm, seed=args.seed, steps=int(model.num_timesteps), final=final, cpu_seconds=cpu)
    if args.arm != "sac":
        result["oracle_agreement"] = float(model.pref_learner.oracle_agreement(2000))
        result["labels"] = int(model.pref_learner.total_feed)
    write_json(STALL / "runs" / args.arm / f"seed{args.seed}.json", result)
    print(f"{args.arm} seed {args.seed}: {model.num_timesteps} steps, return {final:.1f}, {cpu:.0f} CPU s")


def play(model: Any, reward_owner: Any, seed: int) -> list[dict[str, Any]]:
    """
    :param model: the policy to play (deterministic)
    :param reward_owner: the SAC_REWARD run whose reward model scores the steps
    :return: per episode, per step: true reward, learned reward, torso height and uprightness
    """
    from benchmarks.defaults.run import make_env

    env = make_env(TASK, 1, seed)
    physics = env.envs[0].unwrapped.physics
    episodes = []
    obs = env.reset()
    for _ in range(EPISODES):
        rows: list[tuple[float, ...]] = []
        feats, acts = [], []
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            feats.append(reward_owner._reward_features(obs)[0])
            acts.append(reward_owner._reward_actions(action)[0])
            height, upright = float(physics.named.data.xpos["torso", "z"]), float(physics.named.data.xmat["torso", "zz"])
            obs, reward, dones, _ = env.step(action)
            rows.append((float(reward[0]), height, upright))
            done = bool(dones[0])
        learned = reward_owner.pref_learner.predict_rewards(np.stack(feats), np.stack(acts))
        true, height, upright = (np.array(column) for column in zip(*rows))
        episodes.append(dict(true=true, learned=np.asarray(learned, dtype=np.float64), height=height, upright=upright))
    return episodes


@probe(
    "stall_look",
    "both saved policies of a seed scored by the true reward and by the stalled run's reward model",
    shared("seed"),
    environ={"MUJOCO_GL": "osmesa"},
)
def stall_look(args: argparse.Namespace) -> None:
    """Writes ``stall/seed<N>.json`` and prints its table."""
    from scipy.stats import spearmanr
    from stable_baselines3 import SAC

    from sb3_pref import SAC_REWARD

    stalled = SAC_REWARD.load(MODELS / f"defaults_seed{args.seed}")
    expert = SAC.load(MODELS / f"sac_seed{args.seed}")
    result: dict[str, Any] = dict(seed=args.seed, steps=int(stalled.num_timesteps), policies={})
    pooled_true, pooled_learned = [], []
    print(f"seed {args.seed}, at {stalled.num_timesteps} steps; every step scored by the stalled run's reward model")
    print("| policy | true return | learned return | torso height | upright | steps with true reward > 0.8 |")
    print("|---|---|---|---|---|---|")
    for name, model in (("SAC_REWARD (its own)", stalled), ("SAC, true reward", expert)):
        episodes = play(model, stalled, args.seed + 1000)
        figures = dict(
            true_return=float(np.mean([e["true"].sum() for e in episodes])),
            learned_return=float(np.mean([e["learned"].sum() for e in episodes])),
            height=float(np.mean([e["height"].mean() for e in episodes])),
            upright=float(np.mean([e["upright"].mean() for e in episodes])),
            share_above=float(np.mean([np.mean(e["true"] > 0.8) for e in episodes])),
        )
        result["policies"][name] = figures
        pooled_true += [e["true"] for e in episodes]
        pooled_learned += [e["learned"] for e in episodes]
        print(f"| {name} | {figures['true_return']:.1f} | {figures['learned_return']:.1f} | {figures['height']:.2f} | "
              f"{figures['upright']:.2f} | {figures['share_above']:.2f} |")  # fmt: skip
    rho = spearmanr(np.concatenate(pooled_true), np.concatenate(pooled_learned)).statistic
    result["step_spearman"] = float(rho)
    print(f"Spearman of learned and true per-step rewards over both policies' steps: {rho:.2f}")
    write_json(STALL / f"seed{args.seed}.json", result)


if __name__ == "__main__":
    run_script(__file__)
