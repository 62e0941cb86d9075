"""
Side by side with the peer library: ``PPO_REWARD`` against imitation 1.0.1's preference comparisons.

One run per call, in the interpreter of the library it runs: imitation pins old SB3 and gymnasium
versions, so it lives in its own virtual environment (``python -m venv --system-site-packages
/work/venvs/imitation && /work/venvs/imitation/bin/pip install imitation==1.0.1``; torch comes from the
system site). Both get the PPO settings of imitation's preference-comparisons tutorial (8 envs x 256
steps, batch 64, 10 epochs, lr 2e-3, entropy 0.01, clip 0.1, gae 0.95, gamma 0.97, 32x32 networks), the
same env steps and the same number of oracle comparisons. imitation keeps its tutorial's reward net
(``BasicRewardNet`` with ``RunningNorm``), fragments of 100 steps, a hyperbolic query schedule, 3 reward
epochs (x4 on the first) and ``--iterations`` rounds (the tutorial's 5, or the 60 it recommends).

Two studies, each in its own results folder:

- ``peer`` (the first race, kept): 20,480 steps, 5 iterations, ``PPO_REWARD`` on a hand-set schedule (half
  the queries at the first round, the rest in 4 equal rounds), the in-loop agent scored.
- ``peer_100k``: 100k steps (where PPO on the true reward converges on Pendulum-v1), imitation's 60
  iterations, ``PPO_REWARD`` at its defaults (the schedule planned from the budget), and a floor: the same
  defaults with a teacher answering at random. Each run is scored twice: the in-loop agent, and, as
  imitation's tutorial does, a fresh PPO trained for as many steps on the learned reward alone.

The score is the mean true return of a policy over 10 deterministic episodes::

    /work/venvs/imitation/bin/python -m benchmarks peer run --library imitation --study peer_100k --seed 100
    python -m benchmarks peer run --library sb3_pref --study peer_100k --seed 100
    python -m benchmarks peer table --study peer_100k   # -> benchmarks/peer/peer_100k.md
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

from benchmarks import machine
from benchmarks.study import Option, probe, shared

HERE = os.path.dirname(os.path.abspath(__file__))
PPO_SETTINGS = dict(
    n_steps=256, batch_size=64, ent_coef=0.01, learning_rate=2e-3, clip_range=0.1, gae_lambda=0.95, gamma=0.97, n_epochs=10
)
N_ENVS = 8
#: each study's budget and what it scores; the results of each live in ``results/<study>/``
STUDIES = {
    "peer": dict(steps=20_480, iterations=5, schedule="handset", retrain=False),
    "peer_100k": dict(steps=100_000, iterations=60, schedule="defaults", retrain=True),
}
LIBRARIES = ("imitation", "sb3_pref", "sb3_pref_floor", "ppo")


def evaluate(policy: Any, env_id: str, seed: int, episodes: int = 10) -> float:
    import gymnasium as gym

    env = gym.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + episode)
        done, total = False, 0.0
        while not done:
            action = env.action_space.sample() if policy is None else policy.predict(obs, deterministic=True)[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def _imitation_agent(venv: Any, seed: int) -> Any:
    from imitation.policies.base import FeedForward32Policy, NormalizeFeaturesExtractor
    from imitation.util.networks import RunningNorm
    from stable_baselines3 import PPO

    return PPO(
        policy=FeedForward32Policy,
        policy_kwargs=dict(
            features_extractor_class=NormalizeFeaturesExtractor, features_extractor_kwargs=dict(normalize_class=RunningNorm)
        ),
        env=venv,
        seed=seed,
        **PPO_SETTINGS,
    )


def run_imitation(env_id: str, seed: int, steps: int, comparisons: int, iterations: int, **_: Any) -> tuple[Any, Any]:
    """:return: the in-loop agent, and a callable training a fresh agent for ``n`` steps on the learned reward"""
    from imitation.algorithms import preference_comparisons as pc
    from imitation.rewards.reward_nets import BasicRewardNet
    from imitation.rewards.reward_wrapper import RewardVecEnvWrapper
    from imitation.util.networks import RunningNorm
    from imitation.util.util import make_vec_env

    rng = np.random.default_rng(seed)
    venv = make_vec_env(env_id, rng=rng, n_envs=N_ENVS)
    reward_net = BasicRewardNet(venv.observation_space, venv.action_space, normalize_input_layer=RunningNorm)
    trainer = pc.BasicRewardTrainer(
        preference_model=pc.PreferenceModel(reward_net), loss=pc.CrossEntropyRewardLoss(), epochs=3, rng=rng
    )
    agent = _imitation_agent(venv, seed)
    generator = pc.AgentTrainer(algorithm=agent, reward_fn=reward_net, venv=venv, exploration_frac=0.05, rng=rng)
    comparisons_run = pc.PreferenceComparisons(
        generator,
        reward_net,
        num_iterations=iterations,
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

    def retrain(n: int) -> Any:  # the tutorial's last step: a fresh agent on the learned reward alone
        learner = _imitation_agent(RewardVecEnvWrapper(venv, reward_net.predict_processed), seed)
        learner.learn(n)
        return learner

    return agent, retrain


def _learned_reward_env(venv: Any, reward_model: Any) -> Any:
    """``venv`` with its reward replaced by ``reward_model``'s mean prediction for the step's observation and action."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class LearnedReward(VecEnvWrapper):
        def reset(self) -> Any:
            self.last_obs = self.venv.reset()
            return self.last_obs

        def step_async(self, actions: np.ndarray) -> None:
            self.actions = actions
            self.venv.step_async(actions)

        def step_wait(self) -> Any:
            obs, _, dones, infos = self.venv.step_wait()
            rewards = reward_model.predict_obs_action(self.last_obs, self.actions)
            self.last_obs = obs  # after a done: the next episode's first observation, as the next step needs
            return obs, rewards, dones, infos

    return LearnedReward(venv)


def run_sb3_pref(
    env_id: str, seed: int, steps: int, comparisons: int, iterations: int, schedule: str, floor: bool = False
) -> tuple[Any, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref import PPO_REWARD
    from sb3_pref.core.reward_model import RewardModel
    from sb3_pref.core.teachers import ScriptedTeacher

    venv = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
    settings: dict[str, Any] = {}
    if schedule == "handset":
        # The first race's schedule: half the comparisons at the first round, the rest over the next rounds,
        # one round per rollout (imitation front-loads too: 10% at once, then a hyperbolic schedule).
        first = comparisons // 2
        per_round = (comparisons - first) // (iterations - 1)
        model_kwargs = dict(mb_size=per_round, initial_mb_size=first)
        settings = dict(
            num_interaction=N_ENVS * PPO_SETTINGS["n_steps"],
            unsuper_step=N_ENVS * PPO_SETTINGS["n_steps"],
            unsuper_n_epochs=PPO_SETTINGS["n_epochs"],
        )
    else:
        model_kwargs = {}  # what a user gets: the schedule planned from the budget
    reward_model = RewardModel(venv.observation_space, venv.action_space, seed=seed, **model_kwargs)
    # the floor answers every query with a coin: labels independent of the segments
    teacher = ScriptedTeacher(beta=-1, gamma=1, eps_mistake=0.5, eps_skip=0, eps_equal=0, seed=seed) if floor else "oracle"
    model = PPO_REWARD(
        "MlpPolicy",
        venv,
        reward_model=reward_model,
        teacher=teacher,
        max_feed=comparisons,
        policy_kwargs=dict(net_arch=[32, 32]),
        seed=seed,
        **settings,
        **PPO_SETTINGS,
    )
    model.learn(steps)

    def retrain(n: int) -> Any:
        fresh = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
        learner = PPO(
            "MlpPolicy", _learned_reward_env(fresh, reward_model), policy_kwargs=dict(net_arch=[32, 32]), seed=seed,
            **PPO_SETTINGS,
        )  # fmt: skip
        learner.learn(n)
        return learner

    return model, retrain


def run_ppo(env_id: str, seed: int, steps: int, **_: Any) -> tuple[Any, None]:
    """SB3's PPO on the true reward with the same settings: the floor under both libraries' cost."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
    model = PPO("MlpPolicy", venv, policy_kwargs=dict(net_arch=[32, 32]), seed=seed, **PPO_SETTINGS)
    model.learn(steps)
    return model, None


#: which of :data:`STUDIES` a probe reads or writes
STUDY = Option(
    "--study", "peer: the first race (20k steps); peer_100k: 100k steps", choices=sorted(STUDIES), default="peer_100k"
)


@probe("table", "the Markdown table of a study's results (peer_100k: written beside this file)", STUDY)
def print_table(args: argparse.Namespace) -> None:
    """
    The table of the study's results, seed by seed, with the notes that say what it can and cannot show.

    :param args: the options
    """
    if args.study == "peer":
        table()
    else:
        table_100k(args.study)


@probe(
    "run",
    "one run of one library on one seed, in the interpreter of that library, to results/<study>/",
    Option("--library", "the side of the race this run is", choices=LIBRARIES, required=True),
    STUDY,
    shared("env", default="Pendulum-v1"),
    shared("seed", default=100),
    Option("--comparisons", "oracle comparisons (labels)", type=int, default=200),
)
def run(args: argparse.Namespace) -> None:
    """
    Train, score the in-loop agent (and, where the study says, a fresh PPO on the learned reward), write one JSON.

    :param args: the options
    """
    import torch as th

    th.set_num_threads(1)
    study = STUDIES[args.study]
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    runner = {"imitation": run_imitation, "sb3_pref": run_sb3_pref, "sb3_pref_floor": run_sb3_pref, "ppo": run_ppo}
    policy, retrain = runner[args.library](
        args.env,
        args.seed,
        steps=study["steps"],
        comparisons=args.comparisons,
        iterations=study["iterations"],
        schedule=study["schedule"],
        **({"floor": True} if args.library == "sb3_pref_floor" else {}),
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    import stable_baselines3

    record = {
        "library": args.library,
        "study": args.study,
        "env": args.env,
        "seed": args.seed,
        "steps": study["steps"],
        "steps_used": int(policy.num_timesteps),  # imitation rounds each iteration up to whole rollouts
        "iterations": study["iterations"],
        "schedule": study["schedule"] if args.library.startswith("sb3_pref") else None,
        "comparisons": args.comparisons,
        "wall": wall,
        "cpu": cpu,
        "return": evaluate(policy, args.env, args.seed),
        "load_before": load,
        "sb3": stable_baselines3.__version__,
        "python": platform.python_version(),
    }
    if study["retrain"] and retrain is not None:
        cpu = time.process_time()
        record["retrained_return"] = evaluate(retrain(study["steps"]), args.env, args.seed)
        record["cpu_retrain"] = time.process_time() - cpu
    print(json.dumps(record))
    results = os.path.join(HERE, "results", args.study)
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, f"{args.library}_{args.env}_{args.seed}.json")
    with open(path + ".tmp", "w") as file:
        json.dump(record, file, indent=1)
    os.replace(path + ".tmp", path)  # a stopped run leaves no half-written result


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
    records = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(HERE, "results", "peer", "*.json")))]
    cpu_name = machine.cpu_name()
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


def table_100k(study: str) -> None:
    """The ``peer_100k`` tables: every run, then medians, rank tests and paired CPU ratios, into ``<study>.md``."""
    from scipy.stats import mannwhitneyu

    records = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(HERE, "results", study, "*.json")))]
    cpu_name = machine.cpu_name()
    names = {"imitation": "imitation 1.0.1", "sb3_pref": "PPO_REWARD, defaults", "ppo": "PPO, true reward",
             "sb3_pref_floor": "floor: defaults, random teacher"}  # fmt: skip
    lines = [
        f"# PPO_REWARD against imitation 1.0.1 on Pendulum-v1 at {STUDIES[study]['steps']:,} steps ({study})",
        "",
        f"CPU: {cpu_name}, 2 cores, one torch thread per run; imitation and PPO_REWARD of a seed run side by side, "
        "then PPO and the floor. `python -m benchmarks peer table --study peer_100k` writes this "
        "page from `results/peer_100k/`.",
        "",
        "| library | seed | env steps used | CPU (s) | in-loop agent | CPU, retraining (s) | fresh PPO, learned reward |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (LIBRARIES.index(r["library"]), r["seed"])):
        retrained = f"{r['retrained_return']:.1f}" if "retrained_return" in r else "-"
        retrain_cpu = f"{r['cpu_retrain']:.1f}" if "cpu_retrain" in r else "-"
        lines.append(
            f"| {names[r['library']]} | {r['seed']} | {r['steps_used']:,} | {r['cpu']:.1f} | {r['return']:.1f} | "
            f"{retrain_cpu} | {retrained} |"
        )
    by = {lib: [r for r in records if r["library"] == lib] for lib in LIBRARIES}

    def quartiles(values: list[float]) -> str:
        q1, q2, q3 = np.percentile(values, [25, 50, 75])
        return f"{q2:.1f} ({q1:.1f} to {q3:.1f})"

    random_return = evaluate(None, "Pendulum-v1", 100)
    lines += [
        "",
        "Medians over seeds (interquartile range in brackets); a random policy scores "
        f"{random_return:.1f} on the same evaluation episodes:",
        "",
        "| library | seeds | CPU (s) | in-loop agent | fresh PPO on the learned reward |",
        "|---|---|---|---|---|",
    ]
    for lib, rs in by.items():
        if not rs:
            continue
        retrained = [r["retrained_return"] for r in rs if "retrained_return" in r]
        lines.append(
            f"| {names[lib]} | {len(rs)} | {statistics.median(r['cpu'] for r in rs):.1f} | "
            f"{quartiles([r['return'] for r in rs])} | {quartiles(retrained) if retrained else '-'} |"
        )
    lines.append("")
    for a, b in (("sb3_pref", "imitation"), ("sb3_pref", "sb3_pref_floor"), ("imitation", "sb3_pref_floor")):
        for key, what in (("return", "in-loop"), ("retrained_return", "retrained")):
            x = [r[key] for r in by[a] if key in r]
            y = [r[key] for r in by[b] if key in r]
            if len(x) >= 3 and len(y) >= 3:
                p = mannwhitneyu(x, y, alternative="two-sided").pvalue
                lines.append(f"- {names[a]} against {names[b]}, {what}: Mann-Whitney two-sided p = {p:.2g} "
                             f"({len(x)} and {len(y)} seeds)")  # fmt: skip
    paired = {r["seed"]: r["cpu"] for r in by["imitation"]}
    ratios = [r["cpu"] / paired[r["seed"]] for r in by["sb3_pref"] if r["seed"] in paired]
    if ratios:
        lines.append(
            f"- CPU, PPO_REWARD / imitation, per seed (run side by side): median {statistics.median(ratios):.2f} "
            f"(range {min(ratios):.2f} to {max(ratios):.2f}, {len(ratios)} seeds), the training only"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(HERE, f"{study}.md"), "w") as file:
        file.write(report)
