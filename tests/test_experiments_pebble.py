"""
``pebble`` (SAC_REWARD) and ``sac`` in the grid runner: B-Pref's per-task settings and budgets, the
config checks, and a real tiny grid on walker_walk whose PEBBLE run is killed after a checkpoint and
resumed with its replay buffer, then skipped once finished.
"""

import json
import os
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


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(tasks=["hopper_hop"]), "pebble has B-Pref's PEBBLE settings for walker_walk"),
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
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(config)


def _wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {seconds} s")
        time.sleep(0.2)


def test_pebble_grid_spends_its_budget_resumes_with_its_replay_buffer_and_skips_finished_runs(tmp_path):
    pytest.importorskip("yaml")
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
    model = example.main(flags.split())
    assert model.pref_learner.counters()["total_feed"] == 20 and model.learning_rate == 5e-4
    assert model.policy.actor.latent_pi[0].out_features == 32  # diag_gaussian_actor.params.hidden_dim reached SB3
    run_dir = tmp_path / "runs" / "PEBBLE" / "walker_walk" / "seed7"
    with np.load(run_dir / "preferences.npz") as labels:
        assert len(labels["labels"]) == 20
    for name in ("model.zip", "replay_buffer.pkl", "reward_model.pt", "config.json"):
        assert (run_dir / name).exists(), name
