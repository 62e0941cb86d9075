"""
Grids of experiments: tasks x teachers x feedback budgets x seeds, for PPO on the true reward,
PrefPPO, PEBBLE, SAC, RL2 and AD, run on local processes or on Ray, resumable, and turned into figures
and tables. Each kind of run is declared once (:mod:`sb3_pref.experiments.registry`); importing the package
registers the built-in kinds (:mod:`sb3_pref.experiments.kinds`), and :func:`register` adds one.

    from sb3_pref.experiments import load_config, run_grid, write_report

    result = run_grid("benchmarks/grid_smoke.yaml")      # python -m sb3_pref.experiments run ...
    write_report(result.output_dir)                       # python -m sb3_pref.experiments report ...

Three layers, each importing only those below it (``tests/test_import_graph.py`` keeps it so):

- **the grid in general**: ``config``, ``axes``, ``spec``, ``registry``, ``runner``, ``backends``, ``training``,
  ``records``, ``results``, ``report``, ``report_text``, ``stats``; it asks the registry for a kind by name and
  imports no kind;
- **the B-Pref script layer**: ``flags`` (``train_PrefPPO.py``'s flags), ``bpref`` (its envs, models and
  outputs), ``pebble`` (``train_PEBBLE.py``'s settings), ``defaults`` (per-task settings and presets);
- **one module per run kind**: ``ppo_runs`` (ppo, prefppo), ``pebble_runs`` (pebble, sac), ``rl2_runs``,
  ``ad_runs``; ``kinds`` registers them.

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
