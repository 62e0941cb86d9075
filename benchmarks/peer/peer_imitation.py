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
import json
import os
import platform
import time
from typing import Any

import numpy as np

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
    # the random policy (policy None) draws from its own seeded stream: the same score at every table build
    env.action_space.seed(10_000 + seed * 100)
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
