"""
``ad`` runs of a grid: Algorithm Distillation on DarkRoom. A run records its source learners'
histories into ``<run>/histories.npz`` (resumable goal by goal), trains ``AD`` for
``total_timesteps`` updates, then evaluates it on the held-out goals into ``adaptation.csv``
beside a random policy, the source learners' own first episodes and the search-planner bound:
the same file and columns as an ``rl2`` run, so the report draws both.
"""

import os
from typing import Any, Optional

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.experiments.defaults import AD_KEYS, AD_NAMED_PRESETS, AD_PRESETS, ad_preset, task_family
from sb3_pref.experiments.registry import RunKind
from sb3_pref.experiments.spec import RunSpec

__all__ = ["AD", "AD_KEYS", "AD_NAMED_PRESETS", "AD_PRESETS", "ad_task_defaults", "build_ad", "check_ad_settings",
           "finish_ad", "make_ad_test_env"]  # fmt: skip

_INTS = (
    "total_timesteps",
    "learner_steps",
    "learners_per_goal",
    "max_history_steps",
    "seq_len",
    "embed_dim",
    "n_layers",
    "n_heads",
    "ff_dim",
    "batch_size",
    "episodes_per_trial",
    "eval_trials",
    "size",
    "episode_length",
    "n_test",
)


def check_ad_settings(task: str, settings: dict[str, Any]) -> dict[str, Any]:
    """
    :param task: ``darkroom``
    :param settings: the run's settings
    :return: the settings with numbers as numbers
    :raises ValueError: naming the bad setting
    """
    from sb3_pref.ad.collect import LEARNERS

    if task != "darkroom":
        raise ValueError(f"ad runs on darkroom only, got {task!r}")
    checked = dict(settings)
    for key in _INTS:
        value = checked.get(key)
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else float("nan")
        if not number.is_integer() or number < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
        checked[key] = int(number)
    for key in ("attention_dropout", "residual_dropout", "lr", "min_lr", "anneal_fraction"):
        checked[key] = float(checked[key])
    if not 0 < checked["anneal_fraction"] <= 1:
        raise ValueError(f"anneal_fraction must lie in (0, 1], got {checked['anneal_fraction']!r}")
    ad_preset(checked["preset"])  # a known name (the config picked the settings by it)
    if checked["learner"] not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}, got {checked['learner']!r}")
    if checked["observation"] not in ("xy", "onehot"):
        raise ValueError(f"observation must be 'xy' or 'onehot', got {checked['observation']!r}")
    if checked["seq_len"] < checked["episode_length"]:
        raise ValueError(f"seq_len {checked['seq_len']} is shorter than one episode ({checked['episode_length']} steps)")
    checked["terminate_on_goal"] = bool(checked["terminate_on_goal"])
    checked["deterministic_eval"] = bool(checked["deterministic_eval"])
    checked["recency_bias"] = bool(checked["recency_bias"])
    if not isinstance(checked["anneal_after_reward"], bool):  # bool("false") is True: take YAML's booleans only
        raise ValueError(f"anneal_after_reward must be true or false, got {checked['anneal_after_reward']!r}")
    return checked


def _room(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: settings[key] for key in ("size", "episode_length", "terminate_on_goal", "observation")}


def make_ad_test_env(settings: dict[str, Any], seed: int) -> VecEnv:
    """Trials on the held-out goals (the split of ``seed``)."""
    from sb3_pref.envs.darkroom import darkroom_trials

    kwargs = dict(split="test", split_seed=seed, n_test=settings["n_test"], episodes_per_trial=settings["episodes_per_trial"])
    return make_vec_env(
        darkroom_trials,
        n_envs=min(settings["eval_trials"], 20),
        seed=seed + 10_000,
        env_kwargs=dict(**kwargs, **_room(settings)),
    )


def build_ad(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Any]) -> Any:
    """
    The run's histories (recorded, or read back) and a new ``AD`` model, or the one in ``checkpoint``.
    Training is offline and never checkpoints (the runner saves at rollout starts, which AD has not):
    an interrupted run keeps its recorded histories and trains the model again.

    :param spec: the run
    :param monitor_dir: ``<run>/monitor/attempt<k>`` (the runner's argument); the histories go to ``<run>``
    :param checkpoint: a checkpoint to resume from, or None
    """
    run_dir = os.path.dirname(os.path.dirname(os.path.abspath(monitor_dir)))
    from sb3_pref.ad import AD, collect_histories
    from sb3_pref.envs.darkroom import split_goals

    s = spec.hyperparameters
    train, _ = split_goals(spec.seed, size=s["size"], n_test=s["n_test"])
    histories = collect_histories(
        train,
        os.path.join(run_dir, "histories.npz"),
        learner=s["learner"],
        steps=s["learner_steps"],
        learners_per_goal=s["learners_per_goal"],
        seed=spec.seed,
        max_steps=s["max_history_steps"],
        env_kwargs=_room(s),
        learner_kwargs=dict(anneal_fraction=s["anneal_fraction"], anneal_after_reward=s["anneal_after_reward"])
        if s["learner"] == "noisy_expert"
        else None,
    )
    env = make_ad_test_env(s, spec.seed)
    if checkpoint is not None:
        return AD.load(checkpoint.model, env=env, histories=histories)
    return AD(
        histories,
        env=env,
        seq_len=s["seq_len"],
        embed_dim=s["embed_dim"],
        n_layers=s["n_layers"],
        n_heads=s["n_heads"],
        ff_dim=s["ff_dim"],
        attention_dropout=s["attention_dropout"],
        residual_dropout=s["residual_dropout"],
        learning_rate=s["lr"],
        min_learning_rate=s["min_lr"],
        n_updates=s["total_timesteps"],
        batch_size=s["batch_size"],
        max_history_steps=s["max_history_steps"],
        recency_bias=s["recency_bias"],
        seed=spec.seed,
    )


def finish_ad(model: Any, spec: RunSpec, run_dir: str) -> dict[str, Any]:
    """Save the model; evaluate AD, random, the source learners and the search bound into ``adaptation.csv``."""
    from sb3_pref.ad import Histories
    from sb3_pref.ad.evaluation import learner_curve, search_curve
    from sb3_pref.envs.darkroom import DarkRoom, split_goals
    from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, write_adaptation_csv

    s = spec.hyperparameters
    model.save(os.path.join(run_dir, "model.zip"))
    test = model.get_env()
    histories = Histories.load(os.path.join(run_dir, "histories.npz"))
    room = DarkRoom(**_room(s))
    optimal = [room.optimal_return((int(goal[0]), int(goal[1]))) for goal in histories.tasks]
    _, test_goals = split_goals(spec.seed, size=s["size"], n_test=s["n_test"])
    trials, k = s["eval_trials"], s["episodes_per_trial"]
    results = {
        "AD": evaluate_adaptation(model, test, trials, deterministic=s["deterministic_eval"], seed=spec.seed),
        "random (AD room)": evaluate_adaptation(RandomAgent(test.action_space, seed=spec.seed), test, trials, seed=spec.seed),
        "source learners": learner_curve(histories, k, optimal),
        "search bound": search_curve(test_goals, k, s["size"], s["episode_length"], s["terminate_on_goal"]),
    }
    write_adaptation_csv(os.path.join(run_dir, "adaptation.csv"), results)
    summary = {}
    for name, result in results.items():
        means = result.summary("returns")["mean"]
        key = name.replace(" ", "_")
        summary[f"adaptation/{key}_first_episode"] = float(means[0])
        summary[f"adaptation/{key}_last_episode"] = float(means[-1])
    return summary


def ad_task_defaults(task: str) -> dict[str, Any]:
    """
    The seed's setting of ``task`` (:data:`~sb3_pref.experiments.defaults.AD_PRESETS`); a config's ``preset`` replaces it.

    :raises ValueError: for a task AD has no setting for
    """
    family = task_family(task)
    if family not in AD_PRESETS:
        raise ValueError(f"ad does not run on {task!r}")
    return dict(AD_PRESETS[family])


def _why_not(task: str) -> Optional[str]:
    return None if task_family(task) in AD_PRESETS else "ad runs on darkroom"


AD = RunKind(
    name="ad",
    keys=frozenset(AD_KEYS),
    defaults=ad_task_defaults,
    check=check_ad_settings,
    build=build_ad,
    finish=finish_ad,
    why_not=_why_not,
    variant=lambda spec: "AD",
    preset=ad_preset,
    adapts=True,
)
