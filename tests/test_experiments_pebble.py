"""
``pebble`` (SAC_REWARD) and ``sac`` in the grid runner: B-Pref's per-task settings and budgets, other
dm_control and gymnasium tasks, the config checks, a real tiny grid on walker_walk whose PEBBLE run is
killed after a checkpoint and resumed with its replay buffer, then skipped once finished, and a tiny
Pendulum-v1 grid that ends with the closing evaluation.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from sb3_pref.experiments import ConfigError, execute_run, load_config, plan_grid, run_grid, write_report
from sb3_pref.experiments.records import FINISHED, RunRecord, read_csv_columns

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
PEBBLE_RUN = "pebble/walker_walk/oracle/30x10/seed0"


def test_pebble_runs_take_bpref_settings_and_budgets():
    config = load_config(dict(algorithms=["pebble", "sac"], tasks=["walker_walk", "metaworld_door-open-v3"], seeds=1))
    runs = {run.run_id: run for run in config.runs()}
    assert sorted(runs) == [
        "pebble/metaworld_door-open-v3/oracle/10000x50/seed0",
        "pebble/metaworld_door-open-v3/oracle/20000x100/seed0",
        "pebble/walker_walk/oracle/1000x100/seed0",
        "pebble/walker_walk/oracle/100x10/seed0",
        "sac/metaworld_door-open-v3/seed0",
        "sac/walker_walk/seed0",
    ]
    walker = runs["pebble/walker_walk/oracle/1000x100/seed0"].hyperparameters
    # B-Pref's walker_walk script: lr 5e-4, a round every 20k steps, 50 reward epochs, 500k steps, 9000 unsup steps.
    assert walker["agent.params.actor_lr"] == 5e-4 and walker["num_interact"] == 20_000
    assert (walker["reward_update"], walker["total_timesteps"], walker["num_unsup_steps"]) == (50, 500_000, 9000)
    door = runs["sac/metaworld_door-open-v3/seed0"].hyperparameters
    assert door["double_q_critic.params.hidden_dim"] == 256 and door["total_timesteps"] == 1_000_000
    assert "num_interact" not in door and "feed_type" not in door  # SAC on the true reward has no preference settings


def test_pebble_and_sac_take_other_dmc_tasks_and_gymnasium_tasks():
    from sb3_pref.experiments.pebble import PEBBLE_DEFAULTS, make_pebble
    from sb3_pref.experiments.pebble_runs import pebble_config

    config = load_config(
        dict(
            algorithms=["pebble", "sac"],
            tasks={"walker_stand": {}, "cartpole_swingup": {}, "Pendulum-v1": {"total_timesteps": 20_000}},
            budgets=["200x25"],
            seeds=1,
        )
    )
    runs = {run.run_id: run for run in config.runs()}
    assert sorted(runs) == [
        "pebble/Pendulum-v1/oracle/200x25/seed0",
        "pebble/cartpole_swingup/oracle/200x25/seed0",
        "pebble/walker_stand/oracle/200x25/seed0",
        "sac/Pendulum-v1/seed0",
        "sac/cartpole_swingup/seed0",
        "sac/walker_stand/seed0",
    ]
    # A dm_control task without a B-Pref script: B-Pref's dm_control scripts' settings on its config defaults.
    for task in ("walker_stand", "cartpole_swingup"):
        dmc = runs[f"pebble/{task}/oracle/200x25/seed0"].hyperparameters
        assert dmc["agent.params.actor_lr"] == 5e-4 and dmc["num_interact"] == 20_000 and dmc["reward_update"] == 50
        assert (dmc["total_timesteps"], dmc["num_unsup_steps"], dmc["agent.params.batch_size"]) == (500_000, 9000, 1024)
        assert runs[f"sac/{task}/seed0"].hyperparameters["agent.params.actor_lr"] == 5e-4
    # A gymnasium task: B-Pref's config defaults, the config's step count.
    gym = runs["pebble/Pendulum-v1/oracle/200x25/seed0"].hyperparameters
    assert gym["agent.params.actor_lr"] == 1e-4 and gym["num_interact"] == 5000 and gym["reward_update"] == 200
    assert gym["total_timesteps"] == 20_000 and gym["diag_gaussian_actor.params.hidden_dim"] == 1024
    sac = runs["sac/Pendulum-v1/seed0"].hyperparameters
    assert sac["total_timesteps"] == 20_000 and "num_interact" not in sac and "reward_hidden_dim" not in sac
    # The reward network's size is B-Pref's unless a config gives it (and then in the run's settings).
    assert "reward_hidden_dim" not in gym
    built = pebble_config(runs["pebble/Pendulum-v1/oracle/200x25/seed0"])
    assert (built["reward_hidden_dim"], built["reward_hidden_depth"]) == (256, 3)
    assert (PEBBLE_DEFAULTS["reward_hidden_dim"], PEBBLE_DEFAULTS["reward_hidden_depth"]) == (256, 3)
    small = load_config(
        dict(algorithms={"pebble": {"reward_hidden_dim": 16, "reward_hidden_depth": 1}}, tasks=["walker_stand"],
             budgets=["20x10"], seeds=1)
    ).runs()[0]  # fmt: skip
    assert (small.hyperparameters["reward_hidden_dim"], small.hyperparameters["reward_hidden_depth"]) == (16, 1)
    from stable_baselines3.common.env_util import make_vec_env

    tiny = dict(pebble_config(small), **{"diag_gaussian_actor.params.hidden_dim": 8, "double_q_critic.params.hidden_dim": 8})
    reward_model = make_pebble(tiny, make_vec_env("Pendulum-v1", n_envs=1, seed=0)).reward_model
    assert (reward_model.hidden_dim, reward_model.n_layers) == (16, 1)


@pytest.mark.parametrize(
    "changes, message",
    [
        # no B-Pref budget outside its PEBBLE tasks: the config gives them
        (dict(tasks=["hopper_hop"]), "tasks.hopper_hop: pebble needs budgets"),
        (dict(tasks={"Pendulum-v1": {"total_timesteps": 1000}}), "tasks.Pendulum-v1: pebble needs budgets"),
        # no B-Pref step count for a gymnasium task
        (dict(tasks=["Pendulum-v1"], budgets=["20x10"]), "total_timesteps: required for 'Pendulum-v1'"),
        (dict(tasks=["walker_flyy"]), "tasks.walker_flyy: unknown task"),
        (dict(tasks=["Pendulum-v9"]), "tasks.Pendulum-v9: unknown task"),
        (dict(tasks={"CartPole-v1": {"total_timesteps": 1000}}, budgets=["20x10"]), "continuous (Box) action space"),
        (dict(tasks=["metaworld_reach-v2"]), "PEBBLE settings for the Meta-World tasks metaworld_button-press-v2"),
        (dict(algorithms={"pebble": {"reward_hidden_depth": -1}}), "reward_hidden_depth must be an int >= 0"),
        (dict(algorithms={"pebble": {"reward_hidden_dim": 0}}), "reward_hidden_dim must be >= 1"),
        (dict(algorithms={"sac": {"reward_hidden_dim": 64}}), "algorithms.sac.reward_hidden_dim: unknown hyperparameter"),
        (dict(tasks=["darkroom"]), "continuous-action"),
        (dict(algorithms={"pebble": {"max_feedback": 100}}), "max_feedback: not a hyperparameter: set budgets"),
        (dict(algorithms={"pebble": {"num_train_steps": 100}}), "set total_timesteps"),
        (dict(algorithms={"pebble": {"agent.params.critic_lr": 1e-3}}), "agent.params.actor_lr == agent.params.critic_lr"),
        (dict(algorithms={"pebble": {"feed_type": 9}}), "feed_type must be 0-5"),
        (dict(algorithms={"pebble": {"num_interact": 0}}), "num_interact must be >= 1"),
        (dict(algorithms={"sac": {"num_interact": 100}}), "algorithms.sac.num_interact: unknown hyperparameter"),
    ],
)
def test_pebble_config_errors_name_the_setting(changes, message):
    config = dict(algorithms=["pebble"], tasks=["walker_walk"], seeds=1)
    config.update(changes)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(config)


def test_pebble_quality_grid_expands_to_its_runs():
    pytest.importorskip("yaml")
    config = load_config(os.path.join(BENCHMARKS, "pebble", "pebble_quality.yaml"))
    assert config.output_dir == os.path.join("runs", "pebble_quality") and config.checkpoint_every == 25_000
    budgets = {"Pendulum-v1": "200x25", "cartpole_swingup": "1000x100", "walker_stand": "1000x100"}
    expected = [
        run_id
        for seed in range(3)
        for task, budget in budgets.items()
        for run_id in (
            f"sac/{task}/seed{seed}",
            f"pebble/{task}/oracle/{budget}/seed{seed}",
            f"ppo/{task}/seed{seed}",
            f"prefppo/{task}/oracle/{budget}/seed{seed}",
        )
    ]
    runs = config.runs()
    assert [run.run_id for run in runs] == expected
    steps = {"Pendulum-v1": 20_000, "cartpole_swingup": 100_000, "walker_stand": 100_000}
    assert all(run.total_timesteps == steps[run.task] for run in runs)  # the same env steps for every algorithm
    by_id = {run.run_id: run.hyperparameters for run in runs}
    sac = by_id["sac/walker_stand/seed0"]
    # SB3's SAC defaults in B-Pref's names
    assert sac["agent.params.actor_lr"] == 3e-4 and sac["agent.params.batch_size"] == 256
    assert sac["agent.params.init_temperature"] == 1.0 and sac["agent.params.critic_target_update_frequency"] == 1
    assert sac["diag_gaussian_actor.params.hidden_dim"] == 256 and sac["double_q_critic.params.hidden_depth"] == 2
    pendulum = by_id["pebble/Pendulum-v1/oracle/200x25/seed0"]
    assert (pendulum["num_unsup_steps"], pendulum["num_interact"], pendulum["reward_hidden_dim"]) == (2000, 2000, 64)
    walker = by_id["pebble/walker_stand/oracle/1000x100/seed0"]
    assert (walker["num_interact"], walker["reward_hidden_dim"], walker["reward_hidden_depth"]) == (10_000, 64, 2)
    assert walker["num_unsup_steps"] == 4000  # rounds at 5k-95k of 100k, as on cartpole_swingup
    # Every PEBBLE run spends its labels with steps to learn from the last round: seed + pretraining steps, then rounds.
    for run in runs:
        if run.algo == "pebble":
            budget, settings = run.budget, run.hyperparameters
            rounds = -(-budget.max_feed // budget.re_batch)
            last = settings["num_seed_steps"] + settings["num_unsup_steps"] + (rounds - 1) * settings["num_interact"]
            assert last <= 0.95 * run.total_timesteps, run.run_id
    # PrefPPO keeps quality.yaml's settings (its reward model, its PPO) on this grid's steps and budgets.
    prefppo = by_id["prefppo/cartpole_swingup/oracle/1000x100/seed0"]
    assert (prefppo["re_hidden_dim"], prefppo["n_envs"], prefppo["unsuper_step"]) == (64, 8, 8000)
    assert by_id["prefppo/walker_stand/oracle/1000x100/seed0"]["normalize"] is True


def test_pebble_run_on_a_gymnasium_task_spends_its_budget_and_ends_with_the_closing_evaluation(tmp_path):
    """
    A tiny pebble run on Pendulum-v1 through execute_run: labels spent, eval_return in run.json's final (the
    walker_walk grid above checks a sac run's evaluation).
    """
    config = load_config(
        dict(
            output_dir=str(tmp_path / "grid"),
            algorithms={
                # pretraining 100 steps after 100 seed steps, then a round of 10 labels every 100 steps until 40
                "pebble": dict(num_unsup_steps=100, num_interact=100, segment=25, reward_update=5, reset_update=10,
                               ensemble_size=1, reward_hidden_dim=16, reward_hidden_depth=1),
            },
            tasks={"Pendulum-v1": {"total_timesteps": 600}},
            budgets=["40x10"],
            seeds=1,
            checkpoint_every=10_000,  # none: this test is about the end of a run
            hyperparameters={
                "num_seed_steps": 100, "agent.params.batch_size": 32, "diag_gaussian_actor.params.hidden_dim": 16,
                "diag_gaussian_actor.params.hidden_depth": 1, "double_q_critic.params.hidden_dim": 16,
                "double_q_critic.params.hidden_depth": 1,
            },
        )
    )  # fmt: skip
    (run,) = config.runs()
    assert run.run_id == "pebble/Pendulum-v1/oracle/40x10/seed0"
    plan_grid(config)
    run_dir = os.path.join(config.output_dir, run.run_id)
    execute_run(run_dir, stdout_log=False)
    record = RunRecord(run_dir)
    final = record.data["final"]
    assert record.status == FINISHED and record.data["attempts"][-1]["end_step"] == 600
    # 10 deterministic episodes of 200 steps on a fresh env; Pendulum's returns are in [-16.3 * 200, 0]
    assert final["eval_episodes"] == 10 and -3300 < final["eval_return"] <= 0 and final["eval_cpu_time"] > 0
    assert np.isfinite(final["eval_return_std"]) and np.isfinite(final["rollout/ep_rew_mean"])
    # the budget, spent: 4 rounds of 10 (at 200, 300, 400 and 500 steps)
    assert final["labels"] == 40 and read_csv_columns(os.path.join(run_dir, "progress.csv"))["reward/total_feed"][-1] == 40
    with np.load(os.path.join(run_dir, "preferences.npz")) as labels:
        assert len(labels["labels"]) == 40
    for name in ("model.zip", "reward_model.pt"):
        assert os.path.exists(os.path.join(run_dir, name)), name


def _wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {seconds} s")
        time.sleep(0.2)


def test_pebble_grid_spends_its_budget_resumes_with_its_replay_buffer_and_skips_finished_runs(tmp_path):
    pytest.importorskip("yaml")
    # the grid asks 2 episodes of the closing evaluation, not 10: a walker_walk episode is 1000 steps (the
    # Pendulum-v1 test runs the default 10)
    config = load_config(os.path.join(BENCHMARKS, "grid_pebble_smoke.yaml"), output_dir=str(tmp_path / "grid"))
    assert [run.run_id for run in config.runs()] == [PEBBLE_RUN, "sac/walker_walk/seed0"]
    plan_grid(config)
    pebble_dir, sac_dir = (os.path.join(config.output_dir, run.run_id) for run in config.runs())
    # Kill the PEBBLE run (SIGKILL: nothing recorded) at its first checkpoint, during its seed steps. SAC logs at
    # episode ends and a resumed run starts a new episode: from step 300 the 1000-step episode ends at 1300.
    worker = subprocess.Popen(
        [sys.executable, "-m", "sb3_pref.experiments", "worker", pebble_dir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    checkpoint = os.path.join(pebble_dir, "checkpoints", "ckpt_300.zip")
    try:
        _wait_for(lambda: os.path.exists(checkpoint), 120, "checkpoint")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    assert os.path.exists(os.path.join(pebble_dir, "checkpoints", "ckpt_300_replay_buffer.pkl"))

    for run_dir in (pebble_dir, sac_dir):  # in this process: no second interpreter start-up
        execute_run(run_dir, stdout_log=False)
    record = RunRecord(pebble_dir).data
    first, second = record["attempts"]
    assert first["status"] == "running" or first["status"] == "interrupted"
    assert second["status"] == FINISHED and second["start_step"] == 300 and second["end_step"] == 1300
    log = read_csv_columns(os.path.join(pebble_dir, "progress.csv"))
    # The budget went on from the checkpoint: 30 labels in all, not 30 more.
    assert log["reward/total_feed"][-1] == 30 and record["final"]["labels"] == 30
    with np.load(os.path.join(pebble_dir, "preferences.npz")) as labels:
        assert len(labels["labels"]) == 30
    # The last round (at step 1100) relabelled every stored transition, the 300 from before the kill included:
    # a resume without the replay buffer would have relabelled 800.
    assert log["reward/relabelled"][-1] == 1100
    for run_dir in (pebble_dir, sac_dir):
        final = RunRecord(run_dir).data["final"]
        assert RunRecord(run_dir).status == FINISHED and np.isfinite(final["rollout/ep_rew_mean"])
        # the closing evaluation, as a ppo / prefppo run's: deterministic episodes of 1000 steps
        assert final["eval_episodes"] == 2 and 0 <= final["eval_return"] <= 1000 and final["eval_cpu_time"] > 0
        assert os.path.exists(os.path.join(run_dir, "model.zip"))
        # SAC's only episode ends at step 1000: its last 300 steps still get their log row.
        assert read_csv_columns(os.path.join(run_dir, "progress.csv"))["time/total_timesteps"][-1] == 1300
        assert not os.path.exists(os.path.join(run_dir, "checkpoints"))  # buffers went with the checkpoints
    assert os.path.exists(os.path.join(pebble_dir, "reward_model.pt"))

    stamps = {d: open(os.path.join(d, "run.json")).read() for d in (pebble_dir, sac_dir)}
    again = run_grid(config, workers=1, stream=None)
    assert sorted(again.skipped) == [PEBBLE_RUN, "sac/walker_walk/seed0"] and not again.finished
    assert stamps == {d: open(os.path.join(d, "run.json")).read() for d in (pebble_dir, sac_dir)}

    report = write_report(config.output_dir)
    text = open(report).read()
    assert "PEBBLE (oracle)" in text and "SAC (true reward)" in text
    with open(os.path.join(os.path.dirname(report), "summary.json")) as handle:
        summary = json.load(handle)["normalised_by_ppo"]
    # PEBBLE is normalised by SAC on the true reward (B-Pref's metric for it), SAC by itself.
    pebble_score = summary["PEBBLE (oracle) 30x10"]["per_task"]["walker_walk"][0]
    pebble_final, sac_final = (RunRecord(d).data["final"]["rollout/ep_rew_mean"] for d in (pebble_dir, sac_dir))
    expected = pebble_final / sac_final
    assert pebble_score == pytest.approx(expected, rel=1e-6)
    assert summary["SAC (true reward)"]["per_task"]["walker_walk"][0] == pytest.approx(1.0)


def test_train_pebble_example_takes_bpref_flags(tmp_path, monkeypatch):
    """``examples/train_PEBBLE.py`` with a B-Pref run script's flags (steps and sizes scaled down) spends its budget."""
    import importlib.util

    path = os.path.join(os.path.dirname(BENCHMARKS), "examples", "train_PEBBLE.py")
    spec = importlib.util.spec_from_file_location("train_PEBBLE", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.chdir(tmp_path)
    flags = (
        "env=walker_walk seed=7 agent.params.actor_lr=0.0005 agent.params.critic_lr=0.0005 gradient_update=1 "
        "activation=tanh num_unsup_steps=100 num_train_steps=400 num_interact=100 max_feedback=20 reward_batch=10 "
        "reward_update=5 feed_type=1 teacher_beta=-1 teacher_gamma=1 teacher_eps_mistake=0 teacher_eps_skip=0 "
        "teacher_eps_equal=0 num_seed_steps=100 agent.params.batch_size=32 diag_gaussian_actor.params.hidden_dim=32 "
        "double_q_critic.params.hidden_dim=32"
    )
    # one episode of the closing evaluation, not the command line's 10: 9000 walker steps this test asserts nothing of
    model = example.main(flags.split(), eval_episodes=1)
    assert model.pref_learner.counters()["total_feed"] == 20 and model.learning_rate == 5e-4
    assert model.policy.actor.latent_pi[0].out_features == 32  # diag_gaussian_actor.params.hidden_dim reached SB3
    run_dir = tmp_path / "runs" / "PEBBLE" / "walker_walk" / "seed7"
    with np.load(run_dir / "preferences.npz") as labels:
        assert len(labels["labels"]) == 20
    for name in ("model.zip", "replay_buffer.pkl", "reward_model.pt", "config.json"):
        assert (run_dir / name).exists(), name
