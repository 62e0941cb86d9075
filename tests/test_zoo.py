"""RL Zoo: ``ppo_reward`` trained from YAML and replayed with ``enjoy`` through our entry points, and the shipped YAML."""

import contextlib
import inspect
import io
import json
import os
import runpy
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("rl_zoo3", reason="pip install -e '.[zoo]'")

from sb3_pref import PPO_REWARD, RewardModel  # noqa: E402
from sb3_pref.zoo import HYPERPARAMS_FILE, convert_ppo_reward_params, register, with_default_config  # noqa: E402

# Zoo-only keys of a hyperparameter entry (read by the Zoo's ExperimentManager, not passed to the algorithm).
ZOO_KEYS = {"n_timesteps", "n_envs", "normalize", "env_wrapper", "frame_stack", "callback", "vec_env_wrapper", "policy"}
# Small enough for seconds: 2 envs x 128 steps per rollout; 256 steps of pretraining, then a query round every 256.
PENDULUM = {
    "Pendulum-v1": {
        "policy": "MlpPolicy",
        "n_timesteps": 1536,
        "n_envs": 2,
        "n_steps": 128,
        "batch_size": 64,
        "n_epochs": 2,
        "gamma": 0.9,
        "policy_kwargs": "dict(net_arch=[16])",
        "teacher": "oracle",
        "feed_type": "disagreement",
        "num_interaction": 256,
        "max_feed": 30,
        "re_update": 3,
        "unsuper_step": 256,
        "unsuper_n_epochs": 1,
        "max_ep_len": 200,
        "reward_model_kwargs": {"size_segment": 10, "mb_size": 10, "hidden_dim": 16, "ensemble_size": 2},
    }
}


def _zoo(module: str, *args: str, cwd) -> subprocess.CompletedProcess:
    """
    ``python -m module args...`` run as ``-m`` runs it (``__main__``, its ``sys.argv``, in ``cwd``), in this process:
    what is tested is our entry points and the Zoo's flags, not a process boundary, and a fresh interpreter cost ~7 s
    of importing torch, SB3 and the Zoo per call. Its stdout and stderr are returned as a process's would be.
    """
    out, err, code = io.StringIO(), io.StringIO(), 0
    argv, folder = sys.argv, os.getcwd()
    os.chdir(cwd)
    sys.argv = [module, *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        sys.argv = argv
        os.chdir(folder)
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def test_train_from_yaml_then_enjoy_on_pendulum(tmp_path):
    conf = tmp_path / "ppo_reward.yml"
    conf.write_text(yaml.safe_dump(PENDULUM))
    common = ["--algo", "ppo_reward", "--env", "Pendulum-v1", "-f", str(tmp_path / "logs")]
    train = _zoo("sb3_pref.zoo.train", *common, "-conf", str(conf), "--seed", "3", "--eval-freq", "-1", cwd=tmp_path)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    run = tmp_path / "logs" / "ppo_reward" / "Pendulum-v1_1"
    # config.yml holds the plain kwargs, not a pickled reward model (issue 16: a 2.7 MB object dump).
    config_file = run / "Pendulum-v1" / "config.yml"
    assert config_file.stat().st_size < 4000
    config = dict(yaml.unsafe_load(config_file.read_text()))
    assert config["reward_model_kwargs"] == PENDULUM["Pendulum-v1"]["reward_model_kwargs"]
    # The saved model learned from preferences: 256 pretraining steps, then rounds of 10 queries every 256 steps.
    model = PPO_REWARD.load(run / "Pendulum-v1.zip")
    assert isinstance(model.reward_model, RewardModel) and model.reward_model.hidden_dim == 16
    assert model.num_timesteps == 1536
    total_feed = model.pref_learner.counters()["total_feed"]
    assert 20 <= total_feed <= 30, total_feed
    assert len(model.pref_learner.dataset) == total_feed
    assert model.reward_model.ensemble_size == 2

    enjoy = _zoo("sb3_pref.zoo.enjoy", *common, "-n", "300", "--no-render", "--exp-id", "1", "--seed", "0", cwd=tmp_path)
    assert enjoy.returncode == 0, enjoy.stdout[-3000:] + enjoy.stderr[-3000:]
    # The Zoo prints the episode returns of the replayed policy: one full Pendulum episode (200 steps) in 300.
    returns = [float(line.split()[-1]) for line in enjoy.stdout.splitlines() if line.startswith("Episode Reward")]
    assert len(returns) == 1 and -2000 < returns[0] < 0, enjoy.stdout[-2000:]


def test_sac_reward_trains_from_yaml_then_enjoys(tmp_path):
    """``--algo sac_reward`` was refused (issue 45): PEBBLE through the Zoo, planned schedule, then replayed."""
    from sb3_pref import SAC_REWARD

    entry = {
        "policy": "MlpPolicy", "n_timesteps": 600, "learning_starts": 100, "batch_size": 32, "buffer_size": 1000,
        "policy_kwargs": "dict(net_arch=[16])", "teacher": "oracle", "max_feed": 20,
        "reward_model_kwargs": {"size_segment": 10, "hidden_dim": 16, "ensemble_size": 2},
    }  # fmt: skip
    conf = tmp_path / "sac_reward.yml"
    conf.write_text(yaml.safe_dump({"Pendulum-v1": entry}))
    common = ["--algo", "sac_reward", "--env", "Pendulum-v1", "-f", str(tmp_path / "logs")]
    train = _zoo("sb3_pref.zoo.train", *common, "-conf", str(conf), "--seed", "1", "--eval-freq", "-1", cwd=tmp_path)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    model = SAC_REWARD.load(tmp_path / "logs" / "sac_reward" / "Pendulum-v1_1" / "Pendulum-v1.zip")
    assert model.num_timesteps == 600 and model.reward_model.hidden_dim == 16
    # the plan made from the Zoo's budget asked the whole label budget, and the labels are in the saved model
    assert model.feedback_plan.schedule == "auto" and model.feedback_plan.total_timesteps == 600
    assert model.pref_learner.counters()["total_feed"] == 20 == len(model.pref_learner.dataset)
    enjoy = _zoo("sb3_pref.zoo.enjoy", *common, "-n", "250", "--no-render", "--exp-id", "1", "--seed", "0", cwd=tmp_path)
    assert enjoy.returncode == 0, enjoy.stdout[-3000:] + enjoy.stderr[-3000:]
    returns = [float(line.split()[-1]) for line in enjoy.stdout.splitlines() if line.startswith("Episode Reward")]
    assert len(returns) == 1 and -2000 < returns[0] < 0, enjoy.stdout[-2000:]


def test_shipped_sac_reward_hyperparameters_name_only_real_arguments():
    from sb3_pref import SAC_REWARD
    from sb3_pref.zoo import HYPERPARAMS_FILES

    with open(HYPERPARAMS_FILES["sac_reward"]) as handle:
        entries = yaml.safe_load(handle)
    assert {"Pendulum-v1", "walker_walk"} <= set(entries)
    algo_args = set(inspect.signature(SAC_REWARD).parameters)
    model_args = set(inspect.signature(RewardModel).parameters)
    for env_id, entry in entries.items():
        assert not set(entry) - algo_args - ZOO_KEYS, env_id
        assert set(entry["reward_model_kwargs"]) <= model_args, env_id


def test_shipped_hyperparameters_name_only_real_arguments():
    with open(HYPERPARAMS_FILE) as handle:
        entries = yaml.safe_load(handle)
    assert {"Pendulum-v1", "walker_walk", "quadruped_walk"} <= set(entries)
    assert any(name.startswith("metaworld_") for name in entries)
    algo_args = set(inspect.signature(PPO_REWARD).parameters)
    model_args = set(inspect.signature(RewardModel).parameters) - {"observation_space", "action_space"}
    for env_id, entry in entries.items():
        unknown = set(entry) - algo_args - ZOO_KEYS
        assert not unknown, f"{env_id}: {unknown} are neither PPO_REWARD arguments nor Zoo keys"
        assert set(entry["reward_model_kwargs"]) <= model_args, env_id
        assert entry["teacher"] in {"oracle", "noisy", "myopic", "mistake", "skip", "equal"}


def test_registration_and_default_config():
    import rl_zoo3
    from rl_zoo3 import hyperparams_opt

    register()
    assert rl_zoo3.ALGOS["ppo_reward"] is PPO_REWARD and "ppo_reward" in hyperparams_opt.HYPERPARAMS_SAMPLER
    assert with_default_config(["--algo", "ppo_reward", "--env", "walker_walk"])[-2:] == ["--conf-file", HYPERPARAMS_FILE]
    assert with_default_config(["--algo", "ppo_reward", "-conf", "x.yml"]) == ["--algo", "ppo_reward", "-conf", "x.yml"]
    assert with_default_config(["--algo", "ppo"]) == ["--algo", "ppo"]
    assert with_default_config(["--algo", "sac_reward"])[-1].endswith("sac_reward.yml")
    assert "sac_reward" in rl_zoo3.ALGOS and "sac_reward" in hyperparams_opt.HYPERPARAMS_CONVERTER
    # The Optuna sampler's output builds a model: PPO's search space plus the preference schedule.
    optuna = pytest.importorskip("optuna")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for trial in (study.ask() for _ in range(5)):
        params = hyperparams_opt.HYPERPARAMS_SAMPLER["ppo_reward"](trial, 1, 1, {})
        assert params["feed_type"] in {"uniform", "disagreement", "entropy"} and params["re_update"] in {10, 50, 100}
        assert set(params) <= set(inspect.signature(PPO_REWARD).parameters)
        # What a later run reads back from the trial's raw parameters gives the same arguments.
        assert convert_ppo_reward_params(dict(trial.params)).keys() == params.keys()
    from sb3_pref import SAC_REWARD

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))  # SAC's space is not PPO's
    for trial in (study.ask() for _ in range(5)):
        params = hyperparams_opt.HYPERPARAMS_SAMPLER["sac_reward"](trial, 1, 1, {"using_her_replay_buffer": False})
        assert params["feed_type"] in {"uniform", "disagreement", "entropy"}
        assert set(params) <= set(inspect.signature(SAC_REWARD).parameters)
        assert hyperparams_opt.HYPERPARAMS_CONVERTER["sac_reward"](dict(trial.params)).keys() == params.keys()


# What rl_zoo3 writes once the trials of -optimize are done (ExperimentManager.hyperparameters_optimization),
# run in a fresh interpreter so that the modules it imports can be listed.
OPTIMIZATION_REPORT = """
import json, sys
import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
study.optimize(lambda trial: trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True), n_trials=3)
before = set(sys.modules)
study.trials_dataframe().to_csv(sys.argv[1])
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - before})))
"""


def _installed_closure(names: set[str]) -> tuple[set[str], set[str]]:
    """
    :return: the installed distributions among ``names`` and all that they require (canonical names), and the
        optional dependencies (behind an extra) that those declare: a package may import these where installed
    """
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    required: set[str] = set()
    optional: set[str] = set()
    todo = [canonicalize_name(name) for name in names]
    while todo:
        name = todo.pop()
        if name in required:
            continue
        try:
            lines = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        required.add(name)
        for requirement in map(Requirement, lines):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
            else:
                optional.add(canonicalize_name(requirement.name))
    return required, optional


def test_zoo_extra_brings_what_the_optimization_report_imports(tmp_path, setup_metadata):
    """``-optimize`` ran its trials, then crashed writing the report (issue 26: ImportError pandas)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from rl_zoo3.exp_manager import ExperimentManager

    assert ".trials_dataframe().to_csv(" in inspect.getsource(ExperimentManager.hyperparameters_optimization)
    report = tmp_path / "report.csv"
    result = subprocess.run([sys.executable, "-c", OPTIMIZATION_REPORT, str(report)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(report.read_text().splitlines()) == 1 + 3  # a header and one row per trial
    # Every package the report imported comes with the [zoo] extra (or sb3_pref itself), not by chance.
    requirements = [Requirement(line) for line in setup_metadata.requires or []]
    zoo = {r.name for r in requirements if r.marker is None or r.marker.evaluate({"extra": "zoo"})}
    packages = metadata.packages_distributions()
    imported = {canonicalize_name(dist) for module in json.loads(result.stdout) for dist in packages.get(module, [])}
    required, optional = _installed_closure(zoo)
    assert "pandas" in imported and "pandas" in required
    assert imported <= required | optional, imported - required - optional
