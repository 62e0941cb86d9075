"""
Benchmark environments of B-Pref (dm_control and Meta-World) for SB3. dm_control and Meta-World
are optional: they are imported only when an environment is created (the ``dmc`` and ``metaworld`` extras:
``pip install -e ".[dmc,metaworld]"`` in a checkout; sb3_pref is not on PyPI yet).

Importing this package registers the tasks' gymnasium ids under B-Pref's names (``gym.make("walker_walk")``,
``gym.make("metaworld_button-press-topdown-v2")``; see :mod:`sb3_pref.envs.registration`; ``import sb3_pref``
imports it) and warns, with the fix, when the installed dm-control and MuJoCo do not fit together.
"""

from sb3_pref.envs.dmc import DMCEnv, make_dmcontrol_env, make_vec_dmcontrol_env, parse_dmcontrol_name
from sb3_pref.envs.factory import gymnasium_episode_length, is_gymnasium_env_name, make_benchmark_vec_env
from sb3_pref.envs.metaworld import (
    MetaWorldAdapter,
    is_metaworld_env_name,
    make_metaworld_env,
    make_vec_metaworld_env,
    resolve_metaworld_name,
)
from sb3_pref.envs.registration import register_benchmark_envs
from sb3_pref.envs.versions import check_mujoco_versions

register_benchmark_envs()
check_mujoco_versions()

__all__ = [
    "DMCEnv",
    "MetaWorldAdapter",
    "check_mujoco_versions",
    "gymnasium_episode_length",
    "is_gymnasium_env_name",
    "is_metaworld_env_name",
    "make_benchmark_vec_env",
    "make_dmcontrol_env",
    "make_metaworld_env",
    "make_vec_dmcontrol_env",
    "make_vec_metaworld_env",
    "parse_dmcontrol_name",
    "register_benchmark_envs",
    "resolve_metaworld_name",
]
