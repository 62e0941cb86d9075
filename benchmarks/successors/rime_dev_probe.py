"""
The diagnostic behind the RIME section of README.md, on development seeds only: one cartpole_balance run (120k
steps, 1000 labels, the defaults and the README demo's PPO) with a teacher that flips a share of its answers, its
logger's CSV kept, so that RIME's per-round numbers (``reward/rime_trusted``, ``rime_flipped``, ``rime_threshold``)
can be read. Results: ``results/rime_dev/<tag>/progress.csv`` and ``<tag>.txt`` (final return over 10 episodes, the reward's
agreement with the true one on 2000 fresh pairs).

    python benchmarks/successors/rime_dev_probe.py TAG SEED MISTAKE {default,uniform} [plain]

e.g. ``m30_uniform 0 0.3 uniform`` (RIME, uniform queries); a fifth argument ``plain`` turns RIME off.
"""

import sys
from pathlib import Path

import torch as th

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "defaults"))


def main() -> None:
    from run import DMC_PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import configure

    from sb3_pref import PPO_REWARD, RewardModel
    from sb3_pref.core.teachers import ScriptedTeacher
    from sb3_pref.envs import make_vec_dmcontrol_env

    tag, seed, mistake, feed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    if seed >= 100:
        raise SystemExit("seeds 100 and up are the reported ones: probe on the development seeds 0-4")
    th.set_num_threads(1)
    env = make_vec_dmcontrol_env("cartpole_balance", n_envs=8, seed=seed)
    extra = {} if feed == "default" else {"feed_type": feed}
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space), max_feed=1000,
        teacher=ScriptedTeacher(eps_mistake=mistake, seed=seed), rime=len(sys.argv) < 6, seed=seed, **DMC_PPO, **extra,
    )  # fmt: skip
    out = HERE / "results" / "rime_dev"
    model.set_logger(configure(str(out / tag), ["csv"]))
    model.learn(120_000)
    eval_env = make_vec_dmcontrol_env("cartpole_balance", n_envs=1, seed=seed + 1000)
    final, _ = evaluate_policy(model, eval_env, n_eval_episodes=10)
    line = f"{tag} {final} {model.pref_learner.oracle_agreement(2000)}"
    (out / f"{tag}.txt").write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
