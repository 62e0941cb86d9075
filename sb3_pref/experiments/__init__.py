"""
Grids of experiments: tasks x teachers x feedback budgets x seeds, for PPO on the true reward,
PrefPPO, PEBBLE, SAC, RL2 and AD, run on local processes or on Ray, resumable, and turned into figures
and tables. Each kind of run is declared once (:mod:`sb3_pref.experiments.registry`); importing the package
registers the built-in kinds (:mod:`sb3_pref.experiments.kinds`), and :func:`register` adds one.

    from sb3_pref.experiments import load_config, run_grid, write_report

    result = run_grid("benchmarks/grid_smoke.yaml")      # python -m sb3_pref.experiments run ...
    write_report(result.output_dir)                       # python -m sb3_pref.experiments report ...

``pip install -e '.[experiments]'`` in a checkout adds what it needs (PyYAML, Ray for ``backend="ray"``).
"""

from sb3_pref.experiments.config import Budget, ConfigError, GridConfig, RunSpec, load_config
from sb3_pref.experiments.defaults import task_defaults
from sb3_pref.experiments.kinds import BUILTIN_KINDS
from sb3_pref.experiments.registry import RunKind, register, run_kind
from sb3_pref.experiments.report import write_report
from sb3_pref.experiments.runner import GridResult, plan_grid, run_grid
from sb3_pref.experiments.stats import bootstrap_ci, iqm, stratified_bootstrap_ci
from sb3_pref.experiments.training import execute_run

__all__ = [
    "BUILTIN_KINDS",
    "Budget",
    "ConfigError",
    "GridConfig",
    "GridResult",
    "RunKind",
    "RunSpec",
    "bootstrap_ci",
    "execute_run",
    "iqm",
    "load_config",
    "plan_grid",
    "register",
    "run_grid",
    "run_kind",
    "stratified_bootstrap_ci",
    "task_defaults",
    "write_report",
]
