"""
Side by side with the peer library: ``PPO_REWARD`` against imitation 1.0.1's preference comparisons.

One run per call, in the interpreter of the library it runs: imitation pins old SB3 and gymnasium
versions, so it lives in its own virtual environment (``python -m venv --system-site-packages
/work/venvs/imitation && /work/venvs/imitation/bin/pip install imitation==1.0.1``; torch comes from the
system site). Both get the PPO settings of imitation's preference-comparisons tutorial (8 envs x 256
steps, batch 64, 10 epochs, lr 2e-3, entropy 0.01, clip 0.1, gae 0.95, gamma 0.97, 32x32 networks), the
same env steps and the same number of oracle comparisons. imitation keeps its tutorial's reward net
(``BasicRewardNet`` with ``RunningNorm``), fragments of 100 steps, 5 iterations on a hyperbolic query
schedule, 3 reward epochs (x4 on the first). ``PPO_REWARD`` keeps the defaults of ``RewardModel`` and
of its reward schedule; half its queries come at the first round, the rest in 4 equal rounds, one per
rollout; it pretrains on state entropy for one rollout. The score is the mean true return of the final
policy over 10 deterministic episodes::

    /work/venvs/imitation/bin/python benchmarks/peer/peer_imitation.py run --library imitation --env Pendulum-v1 --seed 0
    python benchmarks/peer/peer_imitation.py run --library sb3_pref --env Pendulum-v1 --seed 0
    python benchmarks/peer/peer_imitation.py table   # benchmarks/peer/results/peer/*.json -> benchmarks/peer/README.md
"""

import argparse
import glob
import json
import os
import platform
import statistics
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "peer")
PPO_SETTINGS = dict(
    n_steps=256, batch_size=64, ent_coef=0.01, learning_rate=2e-3, clip_range=0.1, gae_lambda=0.95, gamma=0.97, n_epochs=10
)
N_ENVS, ITERATIONS = 8, 5


def evaluate(policy: Any, env_id: str, seed: int, episodes: int = 10) -> float:
    import gymnasium as gym

    env = gym.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + episode)
        done, total = False, 0.0
        while not done:
            action, _ = policy.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_imitation(env_id: str, seed: int, steps: int, comparisons: int) -> Any:
    from imitation.algorithms import preference_comparisons as pc
    from imitation.policies.base import FeedForward32Policy, NormalizeFeaturesExtractor
    from imitation.rewards.reward_nets import BasicRewardNet
    from imitation.util.networks import RunningNorm
    from imitation.util.util import make_vec_env
    from stable_baselines3 import PPO

    rng = np.random.default_rng(seed)
    venv = make_vec_env(env_id, rng=rng, n_envs=N_ENVS)
    reward_net = BasicRewardNet(venv.observation_space, venv.action_space, normalize_input_layer=RunningNorm)
    trainer = pc.BasicRewardTrainer(
        preference_model=pc.PreferenceModel(reward_net), loss=pc.CrossEntropyRewardLoss(), epochs=3, rng=rng
    )
    agent = PPO(
        policy=FeedForward32Policy,
        policy_kwargs=dict(
            features_extractor_class=NormalizeFeaturesExtractor, features_extractor_kwargs=dict(normalize_class=RunningNorm)
        ),
        env=venv,
        seed=seed,
        **PPO_SETTINGS,
    )
    generator = pc.AgentTrainer(algorithm=agent, reward_fn=reward_net, venv=venv, exploration_frac=0.05, rng=rng)
    comparisons_run = pc.PreferenceComparisons(
        generator,
        reward_net,
        num_iterations=ITERATIONS,
        fragmenter=pc.RandomFragmenter(warning_threshold=0, rng=rng),
        preference_gatherer=pc.SyntheticGatherer(rng=rng),
        reward_trainer=trainer,
        fragment_length=100 if env_id.startswith("Pendulum") else 25,
        transition_oversampling=1,
        initial_comparison_frac=0.1,
        allow_variable_horizon=env_id.startswith("CartPole"),
        initial_epoch_multiplier=4,
        query_schedule="hyperbolic",
    )
    comparisons_run.train(total_timesteps=steps, total_comparisons=comparisons)
    return agent


def run_sb3_pref(env_id: str, seed: int, steps: int, comparisons: int) -> Any:
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref import PPO_REWARD
    from sb3_pref.core.reward_model import RewardModel

    venv = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
    # The README demo's schedule: half the comparisons at the first round, the rest over the next rounds,
    # one round per rollout (imitation front-loads too: 10% at once, then a hyperbolic schedule).
    first = comparisons // 2
    per_round = (comparisons - first) // (ITERATIONS - 1)
    reward_model = RewardModel(venv.observation_space, venv.action_space, mb_size=per_round, initial_mb_size=first, seed=seed)
    model = PPO_REWARD(
        "MlpPolicy",
        venv,
        reward_model=reward_model,
        teacher="oracle",
        max_feed=comparisons,
        num_interaction=N_ENVS * PPO_SETTINGS["n_steps"],
        unsuper_step=N_ENVS * PPO_SETTINGS["n_steps"],
        unsuper_n_epochs=PPO_SETTINGS["n_epochs"],
        policy_kwargs=dict(net_arch=[32, 32]),
        seed=seed,
        **PPO_SETTINGS,
    )
    model.learn(steps)
    return model


def run_ppo(env_id: str, seed: int, steps: int, comparisons: int) -> Any:
    """SB3's PPO on the true reward with the same settings: the floor under both libraries' cost."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
    model = PPO("MlpPolicy", venv, policy_kwargs=dict(net_arch=[32, 32]), seed=seed, **PPO_SETTINGS)
    model.learn(steps)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--library", choices=["imitation", "sb3_pref", "ppo"], required=True)
    run.add_argument("--env", default="Pendulum-v1")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--steps", type=int, default=20_480)
    run.add_argument("--comparisons", type=int, default=200)
    sub.add_parser("table")
    args = parser.parse_args()
    if args.command == "table":
        return table()
    import torch as th

    th.set_num_threads(1)
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    runner = {"imitation": run_imitation, "sb3_pref": run_sb3_pref, "ppo": run_ppo}[args.library]
    policy = runner(args.env, args.seed, args.steps, args.comparisons)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    score = evaluate(policy, args.env, args.seed)
    import stable_baselines3

    record = {
        "library": args.library,
        "env": args.env,
        "seed": args.seed,
        "steps": args.steps,
        "comparisons": args.comparisons,
        "wall": wall,
        "cpu": cpu,
        "return": score,
        "load_before": load,
        "sb3": stable_baselines3.__version__,
        "python": platform.python_version(),
    }
    print(json.dumps(record))
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{args.library}_{args.env}_{args.seed}.json"), "w") as file:
        json.dump(record, file, indent=1)


NOTES = """\
**CartPole-v1 is no test of learning from preferences.** Its reward is +1 on every step, the last one included,
and both libraries cut segments of a fixed length from inside one episode (imitation's fragments, sb3_pref's
segments): every segment's true return equals its length, so an oracle's labels carry no information about the
task. What each policy learns there follows the sign of an offset that comparisons cannot identify: a learned
reward that is negative on average teaches the agent to drop the pole at once (returns near 9), a positive one
to keep it up (500). The CartPole rows measure that coin and the CPU cost, nothing more. Learning from
preferences on a task that ends early needs segments that run past the end (an absorbing state of zero reward),
which neither library does; Pendulum-v1, which never ends early, is the informative task. At the tutorial's
20k steps no method has learned to swing the pendulum up (PPO on the true reward included, about -1100; a
converged policy scores about -200): the rows compare early progress and cost."""


def table() -> None:
    records = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(RESULTS, "*.json")))]
    cpu_name = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    lines = [
        "# PPO_REWARD against imitation 1.0.1 (preference comparisons), side by side",
        "",
        f"CPU: {cpu_name}, 2 cores **shared with other jobs** (load average at each run's start is listed): CPU "
        "seconds are the figure to compare. One torch thread per run; runs one after another. See "
        "`benchmarks/peer/peer_imitation.py` for the settings.",
        "",
        "| env | library | seed | steps | comparisons | CPU (s) | wall (s) | load | true return (10 episodes) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r["env"], r["library"], r["seed"])):
        lines.append(
            f"| {r['env']} | {r['library']} (SB3 {r['sb3']}) | {r['seed']} | {r['steps']} | "
            f"{'- (true reward)' if r['library'] == 'ppo' else r['comparisons']} | "
            f"{r['cpu']:.1f} | {r['wall']:.1f} | {r['load_before']:.1f} | {r['return']:.1f} |"
        )
    lines += ["", "Medians over seeds (CPU ratio = PPO_REWARD / imitation; `ppo` is SB3's PPO on the true reward):", ""]
    for env in sorted({r["env"] for r in records}):
        by = {lib: [r for r in records if r["env"] == env and r["library"] == lib] for lib in ("sb3_pref", "imitation")}
        if not all(by.values()):
            continue
        med = {
            lib: (statistics.median(r["cpu"] for r in rs), statistics.median(r["return"] for r in rs))
            for lib, rs in by.items()
        }
        lines.append(
            f"- {env}: sb3_pref CPU {med['sb3_pref'][0]:.1f} s, return {med['sb3_pref'][1]:.1f} "
            f"({len(by['sb3_pref'])} seeds); "
            f"imitation CPU {med['imitation'][0]:.1f} s, return {med['imitation'][1]:.1f} ({len(by['imitation'])} seeds); "
            f"CPU ratio {med['sb3_pref'][0] / med['imitation'][0]:.2f}"
        )
        ppo = [r for r in records if r["env"] == env and r["library"] == "ppo"]
        if ppo:
            ppo_cpu = statistics.median(r["cpu"] for r in ppo)
            lines[-1] += (
                f"; ppo CPU {ppo_cpu:.1f} s, return {statistics.median(r['return'] for r in ppo):.1f} "
                f"({len(ppo)} seeds): PPO alone is {ppo_cpu / med['imitation'][0]:.2f} of imitation's CPU"
            )
    missing = [
        f"{lib} {env} seed {seed}"
        for env in sorted({r["env"] for r in records})
        for lib in ("imitation", "sb3_pref", "ppo")
        for seed in sorted({r["seed"] for r in records})
        if not any(r["env"] == env and r["library"] == lib and r["seed"] == seed for r in records)
    ]
    if missing:
        lines += [
            "",
            f"Runs with no result: {', '.join(missing)}. imitation's CartPole runs stop with its fragmenter's "
            "`ValueError: No trajectories are long enough for the desired fragment length of 25` when a seed's "
            "policy drops the pole within 25 steps in every episode of an iteration; the medians are over the "
            "seeds that finished.",
        ]
    lines += ["", NOTES]
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(HERE, "peer_imitation.md"), "w") as file:
        file.write(report)


if __name__ == "__main__":
    main()
