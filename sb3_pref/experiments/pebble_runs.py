"""
``pebble`` and ``sac`` runs of a grid: PEBBLE (:class:`~sb3_pref.SAC_REWARD`) with B-Pref's per-task
settings (:data:`~sb3_pref.experiments.pebble.PEBBLE_TASKS`), and SB3's SAC on the true reward with the
same SAC settings, its baseline. Settings are B-Pref's ``train_PEBBLE.py`` names
(``agent.params.actor_lr``, ``num_interact``, ...) with ``total_timesteps`` for its ``num_train_steps``;
the budget (``max_feedback``, ``reward_batch``) and the teacher come from the grid's axes.

Tasks: B-Pref's PEBBLE tasks with their scripts' settings and budgets; any other dm_control task with
B-Pref's dm_control settings; any gymnasium id with a continuous action space (``Pendulum-v1``) with
B-Pref's config defaults. Neither of the last two has a B-Pref budget, and a gymnasium task has no B-Pref
step count: the config gives ``budgets`` (pebble) and ``total_timesteps``. Every finished run closes with
the grid's deterministic evaluation (``eval_return`` in ``run.json``), as a ppo / prefppo run does.

An off-policy run resumes from its replay buffer as well as its model: every checkpoint has the
buffer beside it (``ckpt_<step>_replay_buffer.pkl``), written before the model, so that a
checkpoint whose model exists has its buffer too.
"""

import os
from functools import cache
from typing import Any, Callable, Optional, cast

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.common.callbacks import Checkpoint
from sb3_pref.experiments.axes import RESERVED, Budget
from sb3_pref.experiments.defaults import is_trial_task, metaworld_task, task_family
from sb3_pref.experiments.pebble import _DMC as _PEBBLE_DMC
from sb3_pref.experiments.pebble import PEBBLE_DEFAULTS, PEBBLE_TASKS, _convert
from sb3_pref.experiments.registry import EVAL_SEED_OFFSET, RunKind, run_kind
from sb3_pref.experiments.spec import RunSpec
from sb3_pref.experiments.training import replay_buffer_path

#: the settings a ``pebble`` run takes: B-Pref's, less those the grid's axes or the runner set (axes' RESERVED)
PEBBLE_KEYS = tuple(["total_timesteps", *(k for k in PEBBLE_DEFAULTS if k not in RESERVED)])
# The preference part of PEBBLE: SAC on the true reward has none of it (B-Pref's train_SAC.py has no pretraining).
_PREFERENCE_KEYS = (
    "segment", "activation", "num_unsup_steps", "num_interact", "reward_lr", "reward_update", "feed_type",
    "reset_update", "topK", "ensemble_size", "reward_hidden_dim", "reward_hidden_depth", "reset_critic",
    "first_round_uniform",
)  # fmt: skip
# Settings the library adds to B-Pref's: left out of a run's defaults (pebble_config fills them in), so that the
# settings, and the fingerprint, of a run written before they existed stay the same.
_LIBRARY_KEYS = ("reward_hidden_dim", "reward_hidden_depth", "reset_critic", "first_round_uniform")
#: the settings a ``sac`` run takes
SAC_KEYS = tuple(k for k in PEBBLE_KEYS if k not in _PREFERENCE_KEYS)
_POSITIVE = ("total_timesteps", "num_interact", "reward_update", "topK", "ensemble_size", "segment",
             "agent.params.batch_size", "gradient_update", "agent.params.critic_target_update_frequency",
             "diag_gaussian_actor.params.hidden_dim", "diag_gaussian_actor.params.hidden_depth",
             "double_q_critic.params.hidden_dim", "double_q_critic.params.hidden_depth",
             "reward_hidden_dim")  # fmt: skip
_TEACHER_KEYS = {"beta": "teacher_beta", "gamma": "teacher_gamma", "eps_mistake": "teacher_eps_mistake",
                 "eps_skip": "teacher_eps_skip", "eps_equal": "teacher_eps_equal"}  # fmt: skip


def pebble_task_name(task: str) -> Optional[str]:
    """The :data:`PEBBLE_TASKS` entry of a grid task (``metaworld_door-open-v3`` -> ``metaworld_door-open-v2``), or None."""
    if task in PEBBLE_TASKS:
        return task
    if task_family(task) == "metaworld":
        for name in PEBBLE_TASKS:
            if name.startswith("metaworld_") and metaworld_task(name) == metaworld_task(task):
                return name
    return None


@cache
def _non_box_action_space(task: str) -> Optional[str]:
    """
    The action space of a gymnasium task when it is not a ``Box`` (SAC's only one), else None; None as well
    when the env cannot be built here (a missing extra: its run will say so). Cached: a grid asks once per run.
    """
    import gymnasium

    try:
        env = gymnasium.make(task)
    except (ImportError, gymnasium.error.DependencyNotInstalled):
        return None
    try:
        return None if isinstance(env.action_space, gymnasium.spaces.Box) else str(env.action_space)
    finally:
        env.close()


def _check_continuous_gymnasium_task(algo: str, task: str) -> None:
    """:raises ValueError: for a gymnasium task SAC cannot act in, now rather than when its run starts"""
    action_space = _non_box_action_space(task)
    if action_space is not None:
        raise ValueError(
            f"{algo} trains SAC, which needs a continuous (Box) action space, and {task!r} has {action_space}; "
            "run ppo / prefppo on it, or choose a continuous-action task"
        )


def pebble_task_entry(algo: str, task: str) -> dict[str, Any]:
    """
    The settings ``task`` has on top of B-Pref's config defaults: its run script's (a PEBBLE task of
    B-Pref's), B-Pref's dm_control scripts' (another dm_control task), or none (a gymnasium task).

    :param algo: ``"pebble"`` or ``"sac"`` (for the error message)
    :param task: the grid task
    :return: a new dict, without ``budgets``
    :raises ValueError: for a Meta-World task B-Pref has no PEBBLE settings for, or an unknown task
    """
    name = pebble_task_name(task)
    if name is not None:
        return {key: value for key, value in PEBBLE_TASKS[name].items() if key != "budgets"}
    family = task_family(task)
    if family == "metaworld":
        # B-Pref's Meta-World scripts differ from task to task: no generic Meta-World setting to fall back on.
        metaworld = ", ".join(name for name in PEBBLE_TASKS if name.startswith("metaworld_"))
        raise ValueError(
            f"{algo} has B-Pref's PEBBLE settings for the Meta-World tasks {metaworld} only, not {task!r}: "
            "choose one of those, or run prefppo / ppo on it"
        )
    if family == "gym":
        _check_continuous_gymnasium_task(algo, task)
        return {}
    if family != "dmc":
        raise ValueError(f"{algo} is SAC: it needs a continuous-action task, not the trial task {task!r}")
    try:
        from sb3_pref.envs.dmc import parse_dmcontrol_name
    except ImportError:  # dm_control not installed here: the run itself will say so
        return dict(_PEBBLE_DMC)
    parse_dmcontrol_name(task)  # raises, naming the known tasks
    return dict(_PEBBLE_DMC)


def pebble_task_defaults(algo: str, task: str) -> dict[str, Any]:
    """
    B-Pref's settings of a ``pebble`` or ``sac`` run on ``task``: its config defaults under the task's
    entry (:func:`pebble_task_entry`). A gymnasium task has no ``total_timesteps`` default: B-Pref has no
    step count for it, and its 1M steps for dm_control would be far too many for most (the config gives it).

    :param algo: ``"pebble"`` or ``"sac"``
    :param task: the grid task
    :return: a new dict of the settings ``algo`` takes (PEBBLE names, ``total_timesteps``)
    :raises ValueError: for a task B-Pref has no PEBBLE settings for and that is no dm_control or gymnasium task
    """
    entry = pebble_task_entry(algo, task)
    settings = {**PEBBLE_DEFAULTS, **entry}
    steps = settings.pop("num_train_steps")
    if task_family(task) != "gym":
        settings["total_timesteps"] = steps
    keys = run_kind(algo).keys  # PEBBLE_KEYS or SAC_KEYS, as the kind declares
    return {key: value for key, value in settings.items() if key in keys and key not in _LIBRARY_KEYS}


def pebble_budgets(task: str) -> list[str]:
    """B-Pref's PEBBLE budgets of ``task`` as ``"max_feedback x reward_batch"`` strings (none without a B-Pref script)."""
    name = pebble_task_name(task)
    return [f"{feed}x{batch}" for feed, batch in PEBBLE_TASKS[name]["budgets"]] if name else []


def check_pebble_settings(algo: str, task: str, settings: dict[str, Any]) -> dict[str, Any]:
    """
    :param algo: ``"pebble"`` or ``"sac"``
    :param task: the grid task
    :param settings: the run's settings (PEBBLE names, ``total_timesteps``)
    :return: the settings with numbers as numbers
    :raises ValueError: naming the setting
    """
    if "total_timesteps" not in settings:
        raise ValueError(
            f"total_timesteps: required for {task!r} (B-Pref has no step count for it): "
            f"give total_timesteps under tasks.{task}, algorithms.{algo} or hyperparameters"
        )
    checked = {}
    for key, value in settings.items():
        source = "num_train_steps" if key == "total_timesteps" else key
        checked[key] = _convert(source, str(value)) if isinstance(value, str) else value
        if key in _POSITIVE and not (isinstance(checked[key], (int, float)) and checked[key] >= 1):
            raise ValueError(f"{key} must be >= 1, got {value!r}")
    depth = checked.get("reward_hidden_depth", 0)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"reward_hidden_depth must be an int >= 0 (hidden layers of the reward network), got {depth!r}")
    for key in ("agent.params.actor_lr", "agent.params.critic_lr", "agent.params.alpha_lr"):
        if key in checked and not float(checked[key]) > 0:
            raise ValueError(f"{key} must be > 0, got {checked[key]!r}")
    if checked.get("agent.params.actor_lr") != checked.get("agent.params.critic_lr"):
        raise ValueError(
            "SB3's SAC has one learning rate for actor and critic: give agent.params.actor_lr == agent.params.critic_lr "
            f"(got {checked.get('agent.params.actor_lr')} and {checked.get('agent.params.critic_lr')})"
        )
    if "feed_type" in checked and checked["feed_type"] not in range(6):  # a pebble run's (sac has no queries)
        raise ValueError(f"feed_type must be 0-5 (B-Pref's query methods), got {checked['feed_type']!r}")
    return checked


def pebble_config(spec: RunSpec) -> dict[str, Any]:
    """
    The :func:`~sb3_pref.experiments.pebble.make_pebble` config of a grid run (flat B-Pref names): B-Pref's
    defaults under the run's settings (which hold every setting but the library's reward-network size).
    """
    config = dict(PEBBLE_DEFAULTS, **spec.hyperparameters, env=spec.task, seed=spec.seed, device="cpu")
    config["num_train_steps"] = config.pop("total_timesteps")
    if spec.budget is not None:  # a pebble run: the grid gave it a budget and a teacher
        budget = cast(Budget, spec.budget)
        config.update(max_feedback=budget.max_feed, reward_batch=budget.re_batch)
        config.update({_TEACHER_KEYS[key]: value for key, value in cast(dict, spec.teacher_params).items()})
    return config


def make_sac(config: dict[str, Any], env: VecEnv, **kwargs: Any) -> BaseAlgorithm:
    """SB3's SAC with a PEBBLE config's SAC settings (the baseline on the true reward)."""
    from stable_baselines3 import SAC

    from sb3_pref.experiments.pebble import sac_kwargs

    return SAC("MlpPolicy", env, **sac_kwargs(config), **kwargs)


def _build(
    spec: RunSpec,
    monitor_dir: str,
    checkpoint: Optional[Checkpoint],
    make: Callable[..., BaseAlgorithm],
    algorithm: type[OffPolicyAlgorithm],
) -> BaseAlgorithm:
    """``make(config, env)`` for a new run; else the checkpoint's model of class ``algorithm`` with its replay buffer."""
    from sb3_pref.envs import make_benchmark_vec_env

    env = make_benchmark_vec_env(spec.task, n_envs=1, seed=spec.seed, monitor_dir=monitor_dir)
    if checkpoint is None:
        return make(pebble_config(spec), env, verbose=0)
    buffer = replay_buffer_path(checkpoint.model)
    if not os.path.exists(buffer):
        raise FileNotFoundError(f"{checkpoint.model} has no replay buffer beside it ({buffer})")
    model = algorithm.load(checkpoint.model, env=env, device="cpu")
    model.load_replay_buffer(buffer)
    return model


def build_pebble(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Checkpoint]) -> BaseAlgorithm:
    """A new ``pebble`` model (``SAC_REWARD``) for the run, or the one in ``checkpoint`` with its replay buffer."""
    from sb3_pref.experiments.pebble import make_pebble
    from sb3_pref.sac_reward import SAC_REWARD

    return _build(spec, monitor_dir, checkpoint, make_pebble, SAC_REWARD)


def build_sac(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Checkpoint]) -> BaseAlgorithm:
    """A new ``sac`` model (SB3's SAC on the true reward) for the run, or the one in ``checkpoint`` with its replay buffer."""
    from stable_baselines3 import SAC

    return _build(spec, monitor_dir, checkpoint, make_sac, SAC)


def make_eval_env(spec: RunSpec) -> VecEnv:
    """
    The env of a run's closing evaluation: one fresh env, built as :func:`build_pebble` builds the training
    env but seeded ``seed + EVAL_SEED_OFFSET`` (as a ppo / prefppo run's), without monitor files.
    """
    from sb3_pref.envs import make_benchmark_vec_env

    return make_benchmark_vec_env(spec.task, n_envs=1, seed=spec.seed + EVAL_SEED_OFFSET)


def finish_pebble(model: BaseAlgorithm, spec: RunSpec, run_dir: str) -> dict[str, Any]:
    """
    Save ``model.zip`` (and PEBBLE's reward model and preferences), as a prefppo run does; the runner then
    evaluates the policy on :func:`make_eval_env` (:func:`~sb3_pref.experiments.training.evaluate_final_policy`).

    :return: ``labels``, the labels the run asked for (pebble; nothing for sac)
    """
    from sb3_pref.experiments.bpref import save_outputs

    save_outputs(model, run_dir)
    learner = getattr(model, "pref_learner", None)
    return {"labels": int(learner.counters()["total_feed"])} if learner is not None else {}


def _why_not(algo: str, task: str) -> Optional[str]:
    if not is_trial_task(task):
        return None
    # The trial tasks are the grid's discrete-action ones (DarkRoom, bandits) or trials of episodes (ML1).
    return f"{algo} is SAC: it needs a continuous-action dm_control, gymnasium or Meta-World task, not the trial task {task!r}"


def _variant_pebble(spec: RunSpec) -> str:
    return f"PEBBLE ({spec.teacher})"


PEBBLE = RunKind(
    name="pebble",
    keys=frozenset(PEBBLE_KEYS),
    defaults=lambda task: pebble_task_defaults("pebble", task),
    check=lambda task, settings: check_pebble_settings("pebble", task, settings),
    build=build_pebble,
    finish=finish_pebble,
    why_not=lambda task: _why_not("pebble", task),
    variant=_variant_pebble,
    learns_preferences=True,
    budgets=pebble_budgets,
    eval_env=make_eval_env,
    baseline="sac",
)
SAC = RunKind(
    name="sac",
    keys=frozenset(SAC_KEYS),
    defaults=lambda task: pebble_task_defaults("sac", task),
    check=lambda task, settings: check_pebble_settings("sac", task, settings),
    build=build_sac,
    finish=finish_pebble,
    why_not=lambda task: _why_not("sac", task),
    variant=lambda spec: "SAC (true reward)",
    eval_env=make_eval_env,
    baseline="sac",
)

__all__ = [
    "PEBBLE",
    "PEBBLE_KEYS",
    "SAC",
    "SAC_KEYS",
    "build_pebble",
    "build_sac",
    "check_pebble_settings",
    "finish_pebble",
    "make_eval_env",
    "pebble_budgets",
    "pebble_config",
    "pebble_task_defaults",
    "pebble_task_entry",
    "pebble_task_name",
]
