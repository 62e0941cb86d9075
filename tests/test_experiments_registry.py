"""
The grid runner's registry of run kinds (``sb3_pref/experiments/registry.py`` and ``kinds.py``): every built-in
kind declares what the config, the runner and the report ask of it, and a kind registered from outside the
package is listed in a YAML grid, has its keys and values checked like the built-in ones, and runs to the end.
"""

import dataclasses
import os
import sys
from typing import Any, Optional

import numpy as np
import pytest

from sb3_pref.experiments import ConfigError, execute_run, load_config, plan_grid, task_defaults, write_report
from sb3_pref.experiments.axes import parse_budget
from sb3_pref.experiments.records import FINISHED, RunRecord
from sb3_pref.experiments.registry import (
    EVAL_SEED_OFFSET,
    RunKind,
    declaration_errors,
    kind_names,
    register,
    registered_kinds,
    run_kind,
    unregister,
)
from sb3_pref.experiments.results import load_runs, score_table
from sb3_pref.experiments.spec import RunSpec

BUILTIN = ("ppo", "prefppo", "pebble", "sac", "rl2", "ad")
# A task of each family the built-in kinds take; every kind runs on at least one (no env is built for these).
SAMPLE_TASKS = ("walker_walk", "darkroom", "bandit")


def test_the_builtin_kinds_are_registered_in_order():
    assert kind_names()[: len(BUILTIN)] == BUILTIN
    assert all(registered_kinds()[name].name == name for name in kind_names())
    with pytest.raises(ValueError, match="unknown algorithm 'td3': expected one of ppo, prefppo, pebble, sac, rl2, ad"):
        run_kind("td3")


@pytest.mark.parametrize("name", kind_names())
def test_every_registered_kind_declares_what_it_must(name):
    pytest.importorskip("sb3_pref.rl2")  # the rl2 and ad checks import it
    kind = run_kind(name)
    assert declaration_errors(kind) == []
    tasks = [task for task in SAMPLE_TASKS if kind.runs_on(task)]
    refused = [task for task in SAMPLE_TASKS if not kind.runs_on(task)]
    assert tasks and refused, "each kind takes some of the sample tasks and refuses others"
    for task in refused:
        reason = kind.why_not(task)
        assert isinstance(reason, str) and name in reason
        with pytest.raises(ValueError):
            kind.defaults(task)
    for task in tasks:
        defaults = kind.defaults(task)
        assert defaults == task_defaults(name, task)
        defaults["total_timesteps"] = -1  # a new dict each time: a config's changes stay in its own runs
        assert kind.defaults(task)["total_timesteps"] != -1
        defaults = kind.defaults(task)
        # Every default is a key a config may set (a kind with presets starts from one of them)
        assert set(defaults) <= kind.keys and "total_timesteps" in defaults
        checked = kind.check(task, defaults)
        assert int(checked["total_timesteps"]) >= 1
        budgets = kind.budgets(task)
        assert bool(budgets) == kind.learns_preferences  # B-Pref's budgets for walker_walk; none for the others
        for budget in budgets:
            parse_budget(budget)
        spec = RunSpec(
            algo=name,
            task=task,
            seed=0,
            hyperparameters=checked,
            teacher="oracle" if kind.learns_preferences else None,
            teacher_params={"beta": -1.0} if kind.learns_preferences else None,
            budget=parse_budget(budgets[0]) if budgets else None,
        )
        assert isinstance(kind.variant(spec), str) and kind.variant(spec)
        # a run of a preference kind is filed under its teacher and budget, others under their task
        assert spec.run_id.count("/") == (4 if kind.learns_preferences else 2)
    if kind.baseline is not None:
        assert run_kind(kind.baseline).is_baseline and not run_kind(kind.baseline).learns_preferences
    assert kind.adapts == (kind.baseline is None)  # scored by adaptation, or normalised by a baseline
    if kind.preset is not None:
        preset = kind.preset(kind.defaults(tasks[0])["preset"])
        assert set(preset) <= kind.keys


def test_register_refuses_a_kind_that_cannot_work():
    ppo = run_kind("ppo")
    with pytest.raises(ValueError, match="'ppo' is already registered"):
        register(ppo)
    with pytest.raises(ValueError, match="needs total_timesteps"):
        register(dataclasses.replace(ppo, name="ppo_nosteps", keys=frozenset({"lr"})))
    with pytest.raises(ValueError, match="lowercase letters"):
        register(dataclasses.replace(ppo, name="PPO/2"))
    with pytest.raises(ValueError, match="takes the key 'preset'"):
        register(dataclasses.replace(ppo, name="ppo_presets", preset=lambda name: {}))
    with pytest.raises(ValueError, match="baseline: a kind scored by adaptation"):
        register(dataclasses.replace(ppo, name="ppo_adapts", adapts=True))
    assert not {"ppo_nosteps", "PPO/2", "ppo_presets", "ppo_adapts"} & set(kind_names())


# ------------------------------------------------------------------------------ a kind from outside the package
def _toy_check(task: str, settings: dict[str, Any]) -> dict[str, Any]:
    checked = dict(settings, lr=float(settings["lr"]), n_steps=int(settings["n_steps"]))
    if checked["n_steps"] < 1:
        raise ValueError(f"n_steps must be >= 1, got {settings['n_steps']!r}")
    return checked


def _toy_env(seed: int, monitor_dir: Optional[str]) -> Any:
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env("CartPole-v1", n_envs=1, seed=seed, monitor_dir=monitor_dir)


def _toy_build(spec: RunSpec, monitor_dir: str, checkpoint: Any) -> Any:
    from stable_baselines3 import PPO

    env = _toy_env(spec.seed, monitor_dir)
    if checkpoint is not None:
        return PPO.load(checkpoint.model, env=env, device="cpu")
    s = spec.hyperparameters
    return PPO("MlpPolicy", env, learning_rate=s["lr"], n_steps=s["n_steps"], batch_size=s["n_steps"], seed=spec.seed)


def _toy_finish(model: Any, spec: RunSpec, run_dir: str) -> dict[str, Any]:
    model.save(os.path.join(run_dir, "model.zip"))
    return {"toy_updates": int(model.num_timesteps // spec.hyperparameters["n_steps"])}


TOY = RunKind(
    name="toy",
    keys=frozenset({"total_timesteps", "lr", "n_steps"}),
    defaults=lambda task: dict(total_timesteps=64, lr=3e-4, n_steps=16),
    check=_toy_check,
    build=_toy_build,
    finish=_toy_finish,
    why_not=lambda task: None if task == "CartPole-v1" else "toy runs on CartPole-v1 only",
    variant=lambda spec: "Toy",
    eval_env=lambda spec: _toy_env(spec.seed + EVAL_SEED_OFFSET, None),
    baseline="toy",
)


@pytest.fixture
def toy_kind():
    register(TOY)
    try:
        yield TOY
    finally:
        unregister(TOY.name)
    assert "toy" not in kind_names()


def _write_grid(path, algorithms: str, tasks: str = "[CartPole-v1]", extra: str = "") -> str:
    path.write_text(f"name: toy_grid\nalgorithms: {algorithms}\ntasks: {tasks}\nseeds: 2\ncheckpoint_every: 1000\n{extra}")
    return str(path)


def test_a_registered_kind_is_listed_in_a_yaml_grid_with_its_keys_checked(tmp_path, toy_kind):
    pytest.importorskip("yaml")
    config = load_config(_write_grid(tmp_path / "grid.yaml", '{toy: {lr: "1e-3"}}'), output_dir=str(tmp_path / "out"))
    runs = config.runs()
    assert [run.run_id for run in runs] == ["toy/CartPole-v1/seed0", "toy/CartPole-v1/seed1"]
    # the YAML string went through the kind's check; the defaults filled in the rest
    assert runs[0].hyperparameters == {"total_timesteps": 64, "lr": 0.001, "n_steps": 16}
    assert runs[0].fingerprint() != runs[1].fingerprint()
    assert task_defaults("toy", "CartPole-v1") == {"total_timesteps": 64, "lr": 3e-4, "n_steps": 16}

    bad = [
        # a key the kind does not declare, wherever it is given, is named with where it was
        ('{toy: {learning_rate: 1}}', "[CartPole-v1]", "", "algorithms.toy.learning_rate: unknown hyperparameter"),
        ("[toy]", "[CartPole-v1]", "hyperparameters: {re_segment: 5}\n", "hyperparameters.re_segment: unknown"),
        ("[toy]", "{CartPole-v1: {toy: {n_step: 4}}}", "", r"tasks.CartPole-v1.toy.n_step: unknown .*did you mean n_steps"),
        # the kind's own check, and the task it refuses
        ("{toy: {n_steps: 0}}", "[CartPole-v1]", "", "toy on CartPole-v1: n_steps must be >= 1"),
        ("[toy]", "[darkroom]", "", r"none of the algorithms \['toy'\] runs on it \(toy runs on CartPole-v1 only\)"),
        ("[toyy]", "[CartPole-v1]", "", "algorithms.toyy: unknown algorithm .*did you mean toy"),
    ]  # fmt: skip
    for index, (algorithms, tasks, extra, message) in enumerate(bad):
        with pytest.raises(ConfigError, match=message):
            load_config(_write_grid(tmp_path / f"bad{index}.yaml", algorithms, tasks, extra))


def test_a_registered_kind_runs_beside_a_builtin_one_and_is_reported(tmp_path, toy_kind):
    pytest.importorskip("yaml")
    # beside a built-in kind on the same task: each kind's settings go to its own runs; 2 evaluation episodes
    path = _write_grid(
        tmp_path / "grid.yaml", "{toy: {n_steps: 8}, ppo: {total_timesteps: 1000, use_sde: false}}", extra="eval_episodes: 2\n"
    )
    config = load_config(path, output_dir=str(tmp_path / "out"))
    assert sorted(run.run_id for run in config.runs()) == [
        "ppo/CartPole-v1/seed0", "ppo/CartPole-v1/seed1", "toy/CartPole-v1/seed0", "toy/CartPole-v1/seed1",
    ]  # fmt: skip
    planned = plan_grid(config, only="toy/*")
    assert [run.state for run in planned] == ["todo", "todo"]
    for run in planned:
        record = execute_run(run.run_dir, stdout_log=False)
        assert record["status"] == FINISHED
        final = record["final"]
        # the kind's finish saved the model and summed up; the runner closed with its evaluation on eval_env
        assert final["toy_updates"] == 8 and final["eval_episodes"] == 2 and 1 <= final["eval_return"] <= 500
        assert os.path.exists(os.path.join(run.run_dir, "model.zip"))
    assert RunRecord(planned[0].run_dir).spec == planned[0].spec
    assert next(run for run in config.runs() if run.algo == "ppo").hyperparameters["total_timesteps"] == 1000
    runs = load_runs(config.output_dir)
    assert [run.variant for run in runs] == ["Toy", "Toy"]
    rows, _ = score_table(runs, normalised=False)
    assert [row.variant for row in rows] == ["Toy"] and np.isfinite(rows[0].mean["CartPole-v1"][0])
    # the report draws and scores it as its baseline (normalised by itself: 1)
    rows, skipped = score_table(runs)
    assert skipped == {} and np.allclose(rows[0].per_task["CartPole-v1"].mean(), 1.0)
    with open(write_report(config.output_dir)) as handle:
        report = handle.read()
    assert "| Toy |" in report and "curves_CartPole-v1.png" in report


# ------------------------------------------------------------------------------ a kind in the grid's worker processes
PLUGIN = """
import os
import sys

from sb3_pref.experiments.registry import EVAL_SEED_OFFSET, RunKind, register


def _env(seed, monitor_dir):
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env("CartPole-v1", n_envs=1, seed=seed, monitor_dir=monitor_dir)


def _build(spec, monitor_dir, checkpoint):
    from stable_baselines3 import PPO

    env = _env(spec.seed, monitor_dir)
    if checkpoint is not None:
        return PPO.load(checkpoint.model, env=env, device="cpu")
    n_steps = int(spec.hyperparameters["n_steps"])
    return PPO("MlpPolicy", env, n_steps=n_steps, batch_size=n_steps, seed=spec.seed, device="cpu")


def _finish(model, spec, run_dir):
    return {"pid": os.getpid()}


register(RunKind(
    name="plugin", keys=frozenset({"total_timesteps", "n_steps"}),
    defaults=lambda task: dict(total_timesteps=32, n_steps=16), check=lambda task, settings: dict(settings),
    build=_build, finish=_finish, why_not=lambda task: None if task == "CartPole-v1" else "CartPole-v1 only",
    variant=lambda spec: "Plugin", eval_env=lambda spec: _env(spec.seed + EVAL_SEED_OFFSET, None), baseline="plugin",
), replace=True)
"""


def test_a_kind_from_a_users_module_runs_in_the_grids_worker_processes(tmp_path, monkeypatch):
    """Local workers are fresh processes: they import the module that registered the kind, as run.json records it."""
    pytest.importorskip("yaml")
    from sb3_pref.experiments import run_grid

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "my_grid_kinds.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugins), os.environ.get("PYTHONPATH", "")]))
    import my_grid_kinds  # noqa: F401  (registers "plugin" in this process, as a user's script would)

    try:
        path = _write_grid(tmp_path / "grid.yaml", "[plugin]", extra="output_dir: out\n")
        result = run_grid(path, workers=2, output_dir=str(tmp_path / "out"), stream=None)
        assert sorted(result.finished) == ["plugin/CartPole-v1/seed0", "plugin/CartPole-v1/seed1"], result.failed
        for seed in (0, 1):
            record = RunRecord(str(tmp_path / "out" / "plugin" / "CartPole-v1" / f"seed{seed}"))
            assert record.data["kind_module"] == "my_grid_kinds"
            # trained in a worker process, not in this one
            assert record.status == FINISHED and record.data["final"]["pid"] != os.getpid()
        # the built-in kinds record nothing: their runs' files stay as they were
        ppo = RunRecord.create(
            str(tmp_path / "ppo_run"), load_config(_write_grid(tmp_path / "ppo.yaml", "[ppo]")).runs()[0], "g"
        )
        assert "kind_module" not in ppo.data
    finally:
        unregister("plugin")
        sys.modules.pop("my_grid_kinds", None)


def test_a_kind_declared_in_the_running_script_is_refused_before_any_run_starts(tmp_path):
    pytest.importorskip("yaml")
    from sb3_pref.experiments import run_grid

    def build(spec: RunSpec, monitor_dir: str, checkpoint: Any) -> Any:
        return _toy_build(spec, monitor_dir, checkpoint)

    build.__module__ = "__main__"  # what a function defined in `python my_script.py` reports
    register(dataclasses.replace(TOY, build=build))
    try:
        path = _write_grid(tmp_path / "grid.yaml", "[toy]")
        with pytest.raises(ConfigError, match=r"declared in the script being run \(__main__\).*module on PYTHONPATH"):
            run_grid(path, workers=1, output_dir=str(tmp_path / "out"), stream=None)
        assert not any((tmp_path / "out").rglob("stdout.log"))  # nothing was started
    finally:
        unregister(TOY.name)
