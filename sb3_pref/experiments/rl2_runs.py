"""
RL2 runs of a grid: trial envs for DarkRoom, Bernoulli bandits and Meta-World ML1 tasks, the RL2
model, and at the end an adaptation evaluation on held-out tasks (``adaptation.csv``: one row per
agent, trial and episode, for RL2 and a random policy).

``sb3_pref.rl2`` is imported only when an RL2 run is checked or started, so grids without RL2 work
without it.
"""

import os
from typing import Any, Callable, Optional, cast

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_pref.experiments.defaults import RL2_COMMON, RL2_KEYS, RL2_PRESETS, task_family
from sb3_pref.experiments.registry import RunKind
from sb3_pref.experiments.spec import RunSpec

_POSITIVE_INTS = ("total_timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "hidden_size", "eval_trials")
_OPTIONAL_INTS = ("episodes_per_trial", "n_arms", "n_pulls", "max_episode_steps")


def require_rl2() -> Any:
    """:return: the ``sb3_pref.rl2`` module; :raises ImportError: with what is missing"""
    try:
        import sb3_pref.rl2 as rl2
    except ImportError as error:
        raise ImportError(f"rl2 runs need sb3_pref.rl2, which does not import here ({error})") from error
    return rl2


def check_rl2_settings(task: str, settings: dict[str, Any]) -> dict[str, Any]:
    """
    :param task: ``darkroom``, ``bandit`` or ``ml1-<task>``
    :param settings: the run's settings
    :return: the settings with numbers as numbers
    :raises ValueError: for a bad value; ImportError without ``sb3_pref.rl2``
    """
    require_rl2()
    checked = dict(settings)
    for key in (*_POSITIVE_INTS, *_OPTIONAL_INTS):
        if key in _OPTIONAL_INTS and checked.get(key) is None:
            continue
        checked[key] = _positive_int(key, checked.get(key))
    for key, low, high in (
        ("lr", 0.0, float("inf")),
        ("ent_coef", 0.0, float("inf")),
        ("gamma", 0.0, 1.0),
        ("gae_lambda", 0.0, 1.0),
    ):
        try:
            checked[key] = float(checked[key])
        except (TypeError, ValueError):
            raise ValueError(f"{key} must be a number, got {checked.get(key)!r}") from None
        if not low <= checked[key] <= high or (key == "lr" and checked[key] == 0):
            raise ValueError(f"{key} must be in [{low}, {high}], got {checked[key]}")
    if checked["cell"] not in ("gru", "lstm"):
        raise ValueError(f"cell must be 'gru' or 'lstm', got {checked['cell']!r}")
    checked["deterministic_eval"] = bool(checked["deterministic_eval"])
    if not 1 < checked["batch_size"] <= checked["n_envs"] * checked["n_steps"]:
        raise ValueError(f"batch_size {checked['batch_size']} must be in [2, n_envs x n_steps]")
    return checked


def _positive_int(key: str, value: Any) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not number.is_integer() or number < 1:
        raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
    return int(number)


def _factory(task: str, settings: dict[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The trial-env constructor of ``task`` and its arguments (without ``split``)."""
    family = task_family(task)
    if family == "darkroom":
        from sb3_pref.envs.darkroom import darkroom_trials

        return darkroom_trials, dict(episodes_per_trial=settings["episodes_per_trial"])
    if family == "bandit":
        from sb3_pref.envs.bandit import bandit_trials

        return bandit_trials, dict(n_arms=settings["n_arms"], n_pulls=settings["n_pulls"])
    from sb3_pref.envs.metaworld_ml1 import ml1_trials

    name = task[len("ml1-") :]
    return ml1_trials, dict(
        env_name=name if name.endswith("-v3") else f"{name}-v3",
        episodes_per_trial=settings["episodes_per_trial"],
        max_episode_steps=settings["max_episode_steps"],
    )


def make_rl2_envs(task: str, settings: dict[str, Any], seed: int, monitor_dir: Optional[str]) -> tuple[VecEnv, VecEnv]:
    """
    The training envs (train tasks) and the evaluation envs (held-out tasks, seeded apart).
    Meta-World rewards reach 10 per step, so ML1 observations and rewards are normalised for
    training; the evaluation envs share the observation statistics and report raw rewards.
    """
    factory, kwargs = _factory(task, settings)
    train = make_vec_env(
        factory, n_envs=settings["n_envs"], seed=seed, monitor_dir=monitor_dir, env_kwargs=dict(split="train", **kwargs)
    )
    test = make_vec_env(
        factory, n_envs=min(settings["eval_trials"], 20), seed=seed + 10_000, env_kwargs=dict(split="test", **kwargs)
    )
    if task_family(task) == "ml1":
        train = VecNormalize(train, gamma=settings["gamma"])
        test = VecNormalize(test, training=False, norm_reward=False)
    return train, test


def build_rl2(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Any]) -> BaseAlgorithm:
    """A new RL2 model for the run, or the one in ``checkpoint``."""
    rl2 = require_rl2()
    settings = spec.hyperparameters
    train, _ = make_rl2_envs(spec.task, settings, spec.seed, monitor_dir)
    if checkpoint is not None:
        if isinstance(train, VecNormalize):
            train = VecNormalize.load(checkpoint.vecnormalize, train.venv)
        return rl2.RL2.load(checkpoint.model, env=train, device="cpu")
    return make_rl2_model(settings, train, spec.seed)


def make_rl2_model(settings: dict[str, Any], env: VecEnv, seed: int, verbose: int = 0) -> BaseAlgorithm:
    """
    A new RL2 model from the grid's RL2 settings (:func:`~sb3_pref.experiments.task_defaults` names:
    ``cell``, ``lr``, ``hidden_size``, ...), with two 64-unit heads after the recurrent cell.
    Shared by the grid runner, ``examples/train_RL2.py`` and ``benchmarks/rl2/rl2_darkroom.py``.

    :param settings: checked settings (:func:`check_rl2_settings`)
    :param env: the training VecEnv of trials
    :param seed: the model's seed
    :param verbose: SB3's verbosity
    :return: the RL2 model, on the CPU
    """
    rl2 = require_rl2()
    return rl2.RL2(
        "MlpGruPolicy" if settings["cell"] == "gru" else "MlpLstmPolicy",
        env,
        n_steps=settings["n_steps"],
        batch_size=settings["batch_size"],
        n_epochs=settings["n_epochs"],
        learning_rate=settings["lr"],
        ent_coef=settings["ent_coef"],
        gamma=settings["gamma"],
        gae_lambda=settings["gae_lambda"],
        policy_kwargs=dict(lstm_hidden_size=settings["hidden_size"], net_arch=dict(pi=[64], vf=[64])),
        seed=seed,
        verbose=verbose,
        device="cpu",
    )


def finish_rl2(model: BaseAlgorithm, spec: RunSpec, run_dir: str) -> dict[str, Any]:
    """Save the model and evaluate RL2 and a random policy on held-out tasks into ``adaptation.csv``."""
    from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, write_adaptation_csv

    settings = spec.hyperparameters
    model.save(os.path.join(run_dir, "model.zip"))
    _, test = make_rl2_envs(spec.task, settings, spec.seed, None)
    train = model.get_env()
    if isinstance(train, VecNormalize):
        train.save(os.path.join(run_dir, "vecnormalize.pkl"))
        cast(VecNormalize, test).obs_rms = train.obs_rms  # make_rl2_envs normalises both or neither
    trials = settings["eval_trials"]
    results = {
        "RL2": evaluate_adaptation(model, test, trials, deterministic=settings["deterministic_eval"], seed=spec.seed),
        "random": evaluate_adaptation(RandomAgent(test.action_space, seed=spec.seed), test, trials, seed=spec.seed),
    }
    write_adaptation_csv(os.path.join(run_dir, "adaptation.csv"), results)
    test.close()
    summary = {}
    for name, result in results.items():
        means = result.summary("returns")["mean"]
        summary[f"adaptation/{name}_first_episode"] = float(means[0])
        summary[f"adaptation/{name}_last_episode"] = float(means[-1])
    return summary


def rl2_task_defaults(task: str) -> dict[str, Any]:
    """
    The preset of ``task``'s family (:data:`~sb3_pref.experiments.defaults.RL2_PRESETS`) on the common settings.

    :raises ValueError: for a task that is no trial task
    """
    family = task_family(task)
    if family not in RL2_PRESETS:
        raise ValueError(f"rl2 does not run on {task!r}")
    return {**RL2_COMMON, **RL2_PRESETS[family]}


def _why_not(task: str) -> Optional[str]:
    return None if task_family(task) in RL2_PRESETS else "rl2 runs on trial tasks (darkroom, bandit, ml1-<task>)"


RL2 = RunKind(
    name="rl2",
    keys=frozenset(RL2_KEYS),
    defaults=rl2_task_defaults,
    check=check_rl2_settings,
    build=build_rl2,
    finish=finish_rl2,
    why_not=_why_not,
    variant=lambda spec: "RL2",
    adapts=True,
)
