"""
Benchmark environments of B-Pref (dm_control and Meta-World) for SB3. dm_control and Meta-World
are optional: they are imported only when an environment is created
(``pip install sb3_pref[dmc]`` / ``pip install sb3_pref[metaworld]``).
"""

from sb3_pref.envs.dmc import DMCEnv, make_dmcontrol_env, make_vec_dmcontrol_env, parse_dmcontrol_name
from sb3_pref.envs.factory import make_benchmark_vec_env
from sb3_pref.envs.metaworld import (
    MetaWorldAdapter,
    is_metaworld_env_name,
    make_metaworld_env,
    make_vec_metaworld_env,
    resolve_metaworld_name,
)

__all__ = [
    "DMCEnv",
    "MetaWorldAdapter",
    "is_metaworld_env_name",
    "make_benchmark_vec_env",
    "make_dmcontrol_env",
    "make_metaworld_env",
    "make_vec_dmcontrol_env",
    "make_vec_metaworld_env",
    "parse_dmcontrol_name",
    "resolve_metaworld_name",
]
