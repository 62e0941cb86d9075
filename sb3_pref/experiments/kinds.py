"""
The grid's built-in run kinds, registered in the order a config's error messages list them. The package
imports this module before any other of its own, so every part of the grid runner finds them in the registry
(:mod:`sb3_pref.experiments.registry`); a new kind is declared in its own module and registered the same way.
"""

from sb3_pref.experiments.ad_runs import AD
from sb3_pref.experiments.pebble_runs import PEBBLE, SAC
from sb3_pref.experiments.ppo_runs import PPO, PREFPPO
from sb3_pref.experiments.registry import RunKind, register
from sb3_pref.experiments.rl2_runs import RL2

#: the kinds every grid can run: ppo and prefppo (B-Pref's PPO, PrefPPO), pebble and sac (PEBBLE, its SAC
#: baseline), rl2 and ad (meta-RL on trial tasks)
BUILTIN_KINDS: tuple[RunKind, ...] = (PPO, PREFPPO, PEBBLE, SAC, RL2, AD)

for _kind in BUILTIN_KINDS:
    register(_kind, replace=True)  # replace: a reloaded module registers its kinds again

__all__ = ["BUILTIN_KINDS"]
