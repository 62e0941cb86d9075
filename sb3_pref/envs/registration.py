"""
Gymnasium ids for the B-Pref benchmark tasks, in gymnasium's form (namespace, name, version) and under B-Pref's own
names as aliases.

The ids in gymnasium's form name what they build:

- ``"sb3_pref/dmc-walker-walk-v0"``: dm_control's ``walker`` domain, ``walk`` task (``dmc-<domain>-<task>``);
  LQR's tasks get a 1000-step limit here (dm_control runs them forever, which no SB3 rollout can use);
- ``"sb3_pref/metaworld-sweep-into-v3"``: Meta-World 3's ``sweep-into-v3``, which is what B-Pref's
  ``metaworld_sweep-into-v2`` builds too.

B-Pref's names, which older scripts, grids and RL Zoo files use:

Registered when :mod:`sb3_pref` is imported (``import sb3_pref`` is enough, and RL Zoo's
``--gym-packages sb3_pref`` does it), so that ``gym.make``, SB3's ``make_vec_env`` and RL Zoo's
``--env`` reach them:

- dm_control suite: ``"walker_walk"``, ``"quadruped_walk"``, ``"cheetah_run"``, ... (``domain_task``),
  created as :class:`~sb3_pref.envs.dmc.DMCEnv` (flat float32 observations, actions in ``[-1, 1]``);
- Meta-World: ``"metaworld_button-press-topdown-v2"``, ``"metaworld_sweep-into-v2"``, ... (B-Pref's
  ``metaworld_<task>-v2``; Meta-World 3 renamed the same tasks ``-v3``), created as B-Pref trains on
  them by :func:`~sb3_pref.envs.metaworld.make_metaworld_env`.

Each id carries the task's real episode length as ``max_episode_steps`` (1000 for the dm_control tasks, none
for LQR's; 500 for Meta-World), so that gymnasium, SB3 and RL Zoo read it from the spec. ``gym.make`` then
adds a ``TimeLimit`` at the step where the env truncates by itself: the episode still ends once, at that
step. (``gym.make(id, environment_kwargs={"time_limit": ...})`` changes the env's own limit only: pass the
matching ``max_episode_steps`` with it.)

The task lists and lengths are written out here so that registering imports neither dm_control nor
Meta-World (both optional and slow to import); ``tests/test_registration.py`` checks them against the
packages. Registering never overrides an id that something else registered first.
"""

from typing import Any, Optional

import gymnasium as gym

#: dm_control ``suite.ALL_TASKS`` (dm-control 1.0.28) as B-Pref names ``domain_task``
DMC_TASKS: tuple[tuple[str, str], ...] = (
    *[("acrobot", task) for task in ("swingup", "swingup_sparse")],
    ("ball_in_cup", "catch"),
    *[("cartpole", task) for task in ("balance", "balance_sparse", "swingup", "swingup_sparse", "three_poles", "two_poles")],
    ("cheetah", "run"),
    *[("dog", task) for task in ("fetch", "run", "stand", "trot", "walk")],
    *[("finger", task) for task in ("spin", "turn_easy", "turn_hard")],
    *[("fish", task) for task in ("swim", "upright")],
    *[("hopper", task) for task in ("hop", "stand")],
    *[("humanoid", task) for task in ("run", "run_pure_state", "stand", "walk")],
    *[("humanoid_CMU", task) for task in ("run", "stand", "walk")],
    *[("lqr", task) for task in ("lqr_2_1", "lqr_6_2")],
    *[("manipulator", task) for task in ("bring_ball", "bring_peg", "insert_ball", "insert_peg")],
    ("pendulum", "swingup"),
    *[("point_mass", task) for task in ("easy", "hard")],
    *[("quadruped", task) for task in ("escape", "fetch", "run", "walk")],
    *[("reacher", task) for task in ("easy", "hard")],
    *[("stacker", task) for task in ("stack_2", "stack_4")],
    *[("swimmer", task) for task in ("swimmer15", "swimmer6")],
    *[("walker", task) for task in ("run", "stand", "walk")],
)

#: dm_control's step limit (time limit / control timestep) of every suite task but those of the domains below
DMC_MAX_EPISODE_STEPS = 1000
#: domains whose tasks run without a time limit (dm_control's LQR: ``time_limit=inf``)
DMC_UNLIMITED_DOMAINS: tuple[str, ...] = ("lqr",)

#: Meta-World 3 task names without their ``-v3`` suffix (``metaworld.env_dict.ALL_V3_ENVIRONMENTS``)
METAWORLD_TASKS: tuple[str, ...] = tuple(
    """assembly basketball bin-picking box-close button-press-topdown button-press-topdown-wall button-press
    button-press-wall coffee-button coffee-pull coffee-push dial-turn disassemble door-close door-lock door-open
    door-unlock drawer-close drawer-open faucet-close faucet-open hammer hand-insert handle-press-side handle-press
    handle-pull-side handle-pull lever-pull peg-insert-side peg-unplug-side pick-out-of-hole pick-place
    pick-place-wall plate-slide-back-side plate-slide-back plate-slide-side plate-slide push-back push push-wall
    reach reach-wall shelf-place soccer stick-pull stick-push sweep-into sweep window-close window-open""".split()
)


#: Meta-World's ``max_path_length``, the episode length that ``make_metaworld_env`` keeps by default
METAWORLD_MAX_EPISODE_STEPS = 500


def dmc_env_id(domain: str, task: str) -> str:
    """:return: the registered id of a dm_control task (B-Pref's name), e.g. ``"walker_walk"``"""
    return f"{domain}_{task}"


def metaworld_env_id(task: str) -> str:
    """:return: the registered id of a Meta-World task (B-Pref's name), e.g. ``"metaworld_sweep-into-v2"``"""
    return f"metaworld_{task}-v2"


#: the namespace of the ids in gymnasium's form
NAMESPACE = "sb3_pref"
#: the episode length the namespaced ids give dm_control's unlimited (LQR) tasks
UNLIMITED_TASK_STEPS = 1000


def dmc_gym_id(domain: str, task: str) -> str:
    """:return: the id in gymnasium's form of a dm_control task, e.g. ``"sb3_pref/dmc-walker-walk-v0"``"""
    return f"{NAMESPACE}/dmc-{domain}-{task}-v0"


def metaworld_gym_id(task: str) -> str:
    """:return: the id in gymnasium's form of a Meta-World 3 task, e.g. ``"sb3_pref/metaworld-sweep-into-v3"``"""
    return f"{NAMESPACE}/metaworld-{task}-v3"


def register_benchmark_envs() -> list[str]:
    """
    Register every dm_control and Meta-World task in gymnasium's form and under its B-Pref name (idempotent).

    :return: the ids registered by this call
    """
    # (id, entry point, kwargs, episode length): the ids in gymnasium's form first, then B-Pref's names as aliases.
    dmc, metaworld = "sb3_pref.envs.dmc:DMCEnv", "sb3_pref.envs.metaworld:make_metaworld_env"
    limit = {domain: None if domain in DMC_UNLIMITED_DOMAINS else DMC_MAX_EPISODE_STEPS for domain, _ in DMC_TASKS}
    mw_steps = METAWORLD_MAX_EPISODE_STEPS
    # seed=None for Meta-World: gymnasium's reset(seed=...) seeds the goal sampler, as for any registered env.
    specs: list[tuple[str, str, dict[str, Any], Optional[int]]] = [
        *[(dmc_gym_id(d, t), dmc, {"domain_name": d, "task_name": t}, limit[d] or UNLIMITED_TASK_STEPS) for d, t in DMC_TASKS],
        *[(metaworld_gym_id(t), metaworld, {"name": f"{t}-v3", "seed": None}, mw_steps) for t in METAWORLD_TASKS],
        *[(dmc_env_id(d, t), dmc, {"domain_name": d, "task_name": t}, limit[d]) for d, t in DMC_TASKS],
        *[(metaworld_env_id(t), metaworld, {"name": metaworld_env_id(t), "seed": None}, mw_steps) for t in METAWORLD_TASKS],
    ]  # fmt: skip
    registered = []
    for env_id, entry_point, kwargs, max_episode_steps in specs:
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, kwargs=kwargs, max_episode_steps=max_episode_steps)
            registered.append(env_id)
    return registered
