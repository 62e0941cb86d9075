"""
The grid runner and its report: config parsing and checks, a real tiny grid that is killed and
resumed from its checkpoint, local and Ray backends giving the same results, and the report's numbers
on synthetic logs (bootstrap intervals, IQM, normalisation by PPO).
"""

import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from sb3_pref.experiments import ConfigError, RunSpec, execute_run, load_config, plan_grid, run_grid, write_report
from sb3_pref.experiments.__main__ import main as cli
from sb3_pref.experiments.bpref import make_env, make_prefppo
from sb3_pref.experiments.config import Budget
from sb3_pref.experiments.flags import build_parser
from sb3_pref.experiments.ppo_runs import bpref_args
from sb3_pref.experiments.records import FINISHED, RunLock, RunRecord, read_csv_columns
from sb3_pref.experiments.results import learning_curves, load_runs, score_table
from sb3_pref.experiments.stats import bootstrap_ci, bootstrap_mean_curve, iqm, stratified_bootstrap_ci

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY = dict(
    n_envs=2,
    n_steps=250,
    batch_size=100,
    n_epochs=1,
    num_layer=1,
    hidden_dim=16,
    unsuper_step=500,
    unsuper_n_epochs=1,
    re_num_interaction=500,
    re_update=3,
    re_segment=25,
)
MW = "metaworld_button-press-topdown-v2"


def tiny_grid(output_dir, **changes):
    config = dict(
        name="tiny",
        output_dir=str(output_dir),
        algorithms=["ppo", "prefppo"],
        tasks=["walker_walk"],
        teachers=["oracle"],
        budgets=["20x10"],
        seeds=[0],
        checkpoint_every=500,
        eval_episodes=1,  # the closing evaluation's 10 episodes of walker would cost more than the training
        hyperparameters=dict(TINY, total_timesteps=2500),
    )
    config.update(changes)
    return config


# ------------------------------------------------------------------------------ config
def test_config_expansion_and_precedence(tmp_path):
    config = load_config(
        dict(
            algorithms={"ppo": {}, "prefppo": {"re_update": 7}},
            tasks={"walker_walk": {"total_timesteps": 5000, "prefppo": {"n_envs": 4}}, MW: {"budgets": ["30x10"]}},
            teachers=["oracle", "mistake"],
            budgets=["40x10"],
            seeds=2,
            hyperparameters=dict(TINY, total_timesteps=3000),
        ),
        output_dir=str(tmp_path),
    )
    runs = config.runs()
    assert len(runs) == 12 and [run.seed for run in runs] == [0] * 6 + [1] * 6  # whole seeds first
    by_id = {run.run_id: run for run in runs}
    walker_pref = by_id["prefppo/walker_walk/mistake/40x10/seed1"].hyperparameters
    assert (walker_pref["n_envs"], walker_pref["re_update"], walker_pref["total_timesteps"]) == (4, 7, 5000)
    assert by_id["prefppo/walker_walk/mistake/40x10/seed1"].teacher_params["eps_mistake"] == 0.1
    walker_ppo = by_id["ppo/walker_walk/seed0"].hyperparameters
    assert walker_ppo["n_envs"] == 2 and not any(key.startswith(("re_", "unsuper")) for key in walker_ppo)
    mw_pref = by_id[f"prefppo/{MW}/oracle/30x10/seed0"]  # the task's own budget
    assert mw_pref.budget == Budget(30, 10) and mw_pref.hyperparameters["lr"] == 3e-4  # B-Pref's Meta-World lr
    assert mw_pref.hyperparameters["total_timesteps"] == 3000 and mw_pref.checkpoint_every == 300


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hyperparameters": {"re_updat": 3}}, "did you mean re_update"),
        ({"hyperparameters": {"seed": 3}}, "list it under seeds"),
        ({"hyperparameters": dict(TINY, batch_size=5000)}, "batch-size 5000"),
        ({"algorithms": ["ppo", "td3"]}, "unknown algorithm"),  # sac is one since pebble came
        ({"teachers": ["oracel"]}, "did you mean oracle"),
        ({"budgets": ["10x20"]}, "max_feed >= re_batch"),
        ({"seed": 1}, "did you mean seeds"),
        ({"tasks": ["darkroom"], "algorithms": ["ppo"]}, "none of the algorithms"),
        ({"tasks": ["walker_wlak"]}, "walker_wlak"),
        ({"eval_episodes": -1}, "eval_episodes: expected a number of episodes >= 0"),
        ({"eval_episodes": True}, "eval_episodes"),
    ],
)
def test_config_errors_name_the_setting(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_grid(tmp_path, **change))


def test_eval_episodes_reach_the_runs_and_change_the_fingerprint_only_when_set(tmp_path):
    default, fewer = (load_config(tiny_grid(tmp_path, **change)).runs()[0] for change in ({"eval_episodes": 10}, {}))
    assert default.eval_episodes == 10 and fewer.eval_episodes == 1  # tiny_grid asks 1
    assert default.fingerprint() != fewer.fingerprint()  # the closing evaluation is part of the run's result
    # a run.json written before the setting existed reads as 10 episodes, with the fingerprint it had then
    old = default.to_dict()
    del old["eval_episodes"]
    assert RunSpec.from_dict(old) == default and RunSpec.from_dict(old).fingerprint() == default.fingerprint()
    # committed runs from before the setting keep their recorded fingerprints: a finished grid is not rerun
    pattern = os.path.join(REPO, "benchmarks", "**", "results", "*", "runs", "**", "run.json")
    committed = sorted(glob.glob(pattern, recursive=True))
    assert len(committed) > 10
    for path in committed:
        with open(path) as handle:
            record = json.load(handle)
        assert "eval_episodes" not in record["spec"]
        assert RunSpec.from_dict(record["spec"]).fingerprint() == record["fingerprint"], path


def test_yaml_numbers_are_parsed_before_fingerprinting(tmp_path):
    pytest.importorskip("yaml")
    fingerprints = []
    for text in ("3e-4", "0.0003"):
        path = tmp_path / f"grid_{len(fingerprints)}.yaml"
        path.write_text(f"algorithms: [ppo]\ntasks: [walker_walk]\nseeds: 1\nhyperparameters: {{lr: {text}, n_envs: 2}}\n")
        run = load_config(str(path)).runs()[0]
        assert run.hyperparameters["lr"] == 3e-4
        fingerprints.append(run.fingerprint())
    assert fingerprints[0] == fingerprints[1]


def test_rl2_runs_use_their_presets(tmp_path):
    pytest.importorskip("sb3_pref.rl2", reason="sb3_pref.rl2 is not importable")
    config = load_config(dict(algorithms=["rl2", "ppo"], tasks=["darkroom", "walker_walk"], seeds=1), output_dir=str(tmp_path))
    assert sorted(run.run_id for run in config.runs()) == ["ppo/walker_walk/seed0", "rl2/darkroom/seed0"]
    rl2 = next(run for run in config.runs() if run.algo == "rl2")
    assert (rl2.hyperparameters["episodes_per_trial"], rl2.hyperparameters["cell"]) == (4, "gru")
    with pytest.raises(ConfigError, match="cell"):
        load_config(dict(algorithms={"rl2": {"cell": "rnn"}}, tasks=["darkroom"], seeds=1))


def test_committed_grids_load():
    pytest.importorskip("yaml")
    benchmarks = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    small = load_config(os.path.join(benchmarks, "bpref_small.yaml")).runs()
    assert len(small) == 30 and {run.total_timesteps for run in small} == {176_000}
    prefppo = [run for run in small if run.algo == "prefppo"]
    assert {run.budget.label for run in prefppo} == {"500x50"} and len({run.teacher for run in prefppo}) == 4
    assert len({run.seed for run in small}) == 3
    assert len(load_config(os.path.join(benchmarks, "grid_smoke.yaml")).runs()) == 12
    rl2 = load_config(os.path.join(benchmarks, "rl2", "rl2_small.yaml")).runs()
    assert [(run.algo, run.task, run.total_timesteps) for run in rl2] == [("rl2", "bandit", 500_000)] * 3


def test_cli_dry_run_lists_runs_without_writing(tmp_path, capsys):
    pytest.importorskip("yaml")
    import yaml

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(tiny_grid(tmp_path / "out")))
    assert cli(["run", str(path), "--dry-run"]) == 0
    assert "prefppo/walker_walk/oracle/20x10/seed0" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
    assert cli(["report", str(tmp_path / "nothing")]) == 2


# ------------------------------------------------------------------------------ a real grid
def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_grid_skips_finished_runs_and_resumes_a_killed_one(tmp_path):
    config = load_config(tiny_grid(tmp_path / "grid"))
    pref_dir = os.path.join(config.output_dir, "prefppo/walker_walk/oracle/20x10/seed0")
    ppo_dir = os.path.join(config.output_dir, "ppo/walker_walk/seed0")
    plan_grid(config)
    # Crash the PrefPPO run the hard way (SIGKILL: nothing recorded) once it has a checkpoint past pretraining.
    worker = subprocess.Popen(
        [sys.executable, "-m", "sb3_pref.experiments", "worker", pref_dir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        _wait_for(lambda: os.path.exists(os.path.join(pref_dir, "checkpoints", "ckpt_1500.zip")), 120, "a checkpoint")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    assert RunRecord(pref_dir).status == "running"

    result = run_grid(config, workers=2, stream=None)
    assert sorted(result.finished) == ["ppo/walker_walk/seed0", "prefppo/walker_walk/oracle/20x10/seed0"] and result.ok
    record = RunRecord(pref_dir).data
    first, second = record["attempts"]
    assert first["status"] == "interrupted" and second["status"] == FINISHED
    assert second["start_step"] >= 1500 and second["end_step"] == 2500  # resumed from its newest checkpoint
    log = read_csv_columns(os.path.join(pref_dir, "progress.csv"))
    assert log["time/total_timesteps"].tolist() == [500.0, 1000.0, 1500.0, 2000.0, 2500.0]  # no step logged twice
    assert log["reward/total_feed"][-1] == 20  # the budget went on from the checkpoint, not from zero
    with np.load(os.path.join(pref_dir, "preferences.npz")) as labels:
        assert len(labels["labels"]) == 20
    for name in ("model.zip", "vecnormalize.pkl", "reward_model.pt", "run.json", "tb"):
        assert os.path.exists(os.path.join(pref_dir, name)), name
    assert not os.path.exists(os.path.join(pref_dir, "checkpoints"))
    assert record["versions"]["stable_baselines3"] and record["wall_time"] > 0 and record["seed"] == 0

    # Finished runs are skipped and not written to.
    stamps = {
        d: (os.path.getmtime(os.path.join(d, "model.zip")), open(os.path.join(d, "run.json")).read())
        for d in (pref_dir, ppo_dir)
    }
    again = run_grid(config, workers=2, stream=None)
    assert sorted(again.skipped) == sorted(result.finished) and not again.finished
    changed = load_config(tiny_grid(tmp_path / "grid", hyperparameters=dict(TINY, total_timesteps=2500, n_epochs=2)))
    conflict = run_grid(changed, stream=None)
    assert sorted(conflict.conflicts) == sorted(result.finished) and not conflict.ok
    for d, (mtime, text) in stamps.items():
        assert (os.path.getmtime(os.path.join(d, "model.zip")), open(os.path.join(d, "run.json")).read()) == (mtime, text)


def test_progress_lines_count_the_run_that_took_a_freed_slot(tmp_path):
    import io

    stream = io.StringIO()
    grid = tiny_grid(tmp_path / "grid", algorithms=["ppo"], seeds=[0, 1], hyperparameters=dict(TINY, total_timesteps=500))
    assert run_grid(load_config(grid), workers=1, stream=stream).ok
    lines = stream.getvalue().splitlines()
    first = lines.index(next(line for line in lines if line.startswith("finished ppo/walker_walk/seed0")))
    assert lines[first + 1].startswith("runs: 1/2 done, 1 running, 0 failed, 0 to go"), lines
    assert lines[-2].startswith("runs: 2/2 done, 0 running, 0 failed, 0 to go") and lines[-1] == "grid done", lines


def test_a_run_held_by_another_process_is_left_alone(tmp_path):
    config = load_config(tiny_grid(tmp_path / "grid"))
    run_dir = os.path.join(config.output_dir, "ppo/walker_walk/seed0")
    plan_grid(config)
    lock = RunLock(run_dir)
    assert lock.acquire()
    try:
        result = run_grid(config, only="ppo/*", stream=None)
        assert result.running_elsewhere == ["ppo/walker_walk/seed0"] and not result.ok
        with pytest.raises(RuntimeError, match="another process"):
            execute_run(run_dir)
    finally:
        lock.release()
    assert RunRecord(run_dir).status == "pending"


def test_local_and_ray_backends_give_the_same_results(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[experiments]')")
    from sb3_pref.experiments.backends import RayBackend

    begin = time.monotonic()
    try:
        backend = RayBackend(workers=1)
    except Exception as error:  # pragma: no cover - depends on the machine
        pytest.skip(f"Ray did not start: {error!r}")
    if time.monotonic() - begin > 20:
        ray.shutdown()
        pytest.skip(f"Ray took {time.monotonic() - begin:.0f} s to start (more than 20 s)")
    # One env, so that its 1000-step episode ends within the run and rollout/ep_rew_mean is logged.
    grid = dict(algorithms=["ppo"], hyperparameters=dict(TINY, n_envs=1, total_timesteps=1000))
    try:
        run_grid(load_config(tiny_grid(tmp_path / "ray", **grid)), backend=backend, stream=None)
    finally:
        ray.shutdown()
    run_grid(load_config(tiny_grid(tmp_path / "local", **grid)), workers=1, stream=None)
    logs = [read_csv_columns(str(tmp_path / kind / "ppo/walker_walk/seed0/progress.csv")) for kind in ("ray", "local")]
    keys = [key for key in logs[0] if not key.startswith("time/")]
    assert "train/loss" in keys and "rollout/ep_rew_mean" in keys
    for key in keys:
        np.testing.assert_array_equal(logs[0][key], logs[1][key], err_msg=key)
    assert RunRecord(str(tmp_path / "ray" / "ppo/walker_walk/seed0")).data["attempts"][0]["backend"] == "ray"


# ------------------------------------------------------------------------------ statistics
def test_iqm_matches_the_trimmed_mean():
    assert iqm(np.arange(1, 9)) == 4.5  # mean of 3, 4, 5, 6
    assert iqm([1.0, 2.0, 100.0]) == pytest.approx(103 / 3)  # n=3: nothing trimmed (int(0.75) = 0)
    values = np.random.default_rng(0).normal(size=37)
    stats = pytest.importorskip("scipy.stats")
    assert iqm(values) == pytest.approx(stats.trim_mean(values, 0.25))


def test_bootstrap_intervals_contain_the_estimate():
    rng = np.random.default_rng(1)
    values = rng.normal(10.0, 2.0, size=10)
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high and high - low < 4 * 2.0
    assert bootstrap_ci(values) == bootstrap_ci(values)  # seeded: a report drawn twice is identical
    assert bootstrap_ci([3.0]) == (3.0, 3.0)
    groups = [rng.normal(size=5), rng.normal(5, 1, size=5)]
    low, high = stratified_bootstrap_ci(groups)
    assert low <= iqm(np.concatenate(groups)) <= high
    mean, low, high = bootstrap_mean_curve(np.array([[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [1.0, 2.0, np.nan]]))
    np.testing.assert_allclose(mean, [1.0, 2.0, 3.0])
    assert np.all(low <= mean) and np.all(mean <= high)


# ------------------------------------------------------------------------------ the report
def _fake_run(root, algo, task, seed, final, teacher=None, metric="rollout/ep_rew_mean", rl2_curve=None, eval_return=None):
    budget = Budget(20, 10) if algo == "prefppo" else None
    params = {"beta": -1.0, "gamma": 1.0, "eps_mistake": 0.0, "eps_skip": 0.0, "eps_equal": 0.0} if teacher else None
    spec = RunSpec(algo, task, seed, {"total_timesteps": 4000}, teacher=teacher, teacher_params=params, budget=budget)
    run_dir = os.path.join(root, spec.run_id)
    record = RunRecord.create(run_dir, spec, "fake")
    record.data.update(status=FINISHED, wall_time=60.0)
    if eval_return is not None:
        record.data["final"] = {"eval_return": eval_return, "eval_episodes": 10}
    record.save()
    with open(os.path.join(run_dir, "progress.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time/total_timesteps", metric, "reward/total_feed", "reward/true_pref_accuracy"])
        for step in range(1, 11):  # the metric climbs to `final` and stays there for the last 10% of rows
            writer.writerow(
                [step * 400, final * min(1.0, step / 9), min(20, 10 * (step // 2)), 0.5 + 0.04 * step if teacher else ""]
            )
    if rl2_curve is not None:
        with open(os.path.join(run_dir, "adaptation.csv"), "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["agent", "trial", "episode", "task", "return", "success", "optimal"])
            for episode, value in enumerate(rl2_curve):
                writer.writerow(["RL2", 0, episode, 0, value, "nan", "nan"])
                writer.writerow(["random", 0, episode, 0, 1.0, "nan", "nan"])
    return run_dir


def test_report_normalises_by_ppo_with_iqm_and_intervals(tmp_path):
    root = str(tmp_path / "grid")
    for seed, (ppo, oracle) in enumerate([(100, 50), (200, 100), (300, 150)]):
        _fake_run(root, "ppo", "walker_walk", seed, ppo)
        _fake_run(root, "prefppo", "walker_walk", seed, oracle, teacher="oracle")
    for seed, (ppo, oracle) in enumerate([(0.5, 0.2), (0.5, 0.4), (1.0, 0.6)]):
        _fake_run(root, "ppo", MW, seed, ppo, metric="rollout/success_rate")
        _fake_run(root, "prefppo", MW, seed, oracle, teacher="oracle", metric="rollout/success_rate")
    runs = load_runs(root)
    rows, skipped = score_table(runs)
    assert not skipped and [row.variant for row in rows] == ["PPO (true reward)", "oracle"]
    ppo_row, oracle_row = rows
    assert ppo_row.mean["walker_walk"][0] == pytest.approx(1.0)
    np.testing.assert_allclose(oracle_row.per_task["walker_walk"], [0.25, 0.5, 0.75])  # 50/200, 100/200, 150/200
    np.testing.assert_allclose(oracle_row.per_task[MW], [0.3, 0.6, 0.9])  # success over PPO's mean success 2/3
    mean, low, high = oracle_row.mean["walker_walk"]
    assert mean == pytest.approx(0.5) and low <= 0.5 <= high and low >= 0.25 and high <= 0.75
    assert oracle_row.iqm == pytest.approx(np.mean([0.3, 0.5, 0.6, 0.75]))  # pooled 6 scores, one trimmed each end
    assert oracle_row.iqm_ci[0] <= oracle_row.iqm <= oracle_row.iqm_ci[1]

    steps, matrix = learning_curves(
        [run for run in runs if run.spec.algo == "ppo" and run.spec.task == "walker_walk"], "rollout/ep_rew_mean"
    )
    assert steps[0] == 400 and steps[-1] == 4000 and matrix.shape == (3, 100)
    np.testing.assert_allclose(matrix[:, -1], [100, 200, 300])

    report = write_report(root)
    out = os.path.dirname(report)
    produced = sorted(os.listdir(out))
    for name in (
        "curves_walker_walk_20x10.png",
        f"curves_{MW}_20x10.png",
        "reward_quality_walker_walk_20x10.png",
        "scores.csv",
        "summary.json",
    ):
        assert name in produced, name
    text = open(report).read()
    assert "| oracle | 20x10 | " in text and "0.5 [" in text and "IQM" in text
    with open(os.path.join(out, "scores.csv")) as handle:
        assert len(list(csv.DictReader(handle))) == 12
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["normalised_by_ppo"]["oracle 20x10"]["iqm"] == pytest.approx(0.5375)


def test_report_scores_the_closing_evaluation_on_request(tmp_path):
    # training returns say the learner is at half the baseline, the deterministic evaluation says 0.9 of it
    root = str(tmp_path / "grid")
    for seed, (train, evaluated) in enumerate([(100, 800), (200, 1000), (300, 900)]):
        _fake_run(root, "ppo", "walker_walk", seed, train, eval_return=evaluated)
        _fake_run(root, "prefppo", "walker_walk", seed, train / 2, teacher="oracle", eval_return=0.9 * evaluated)
    _fake_run(root, "ppo", "walker_walk", 3, 400)  # no evaluation: NaN under "eval", not its training return
    runs = load_runs(root)
    training_rows, _ = score_table(runs)
    eval_rows, _ = score_table(runs, score="eval")
    np.testing.assert_allclose(training_rows[1].per_task["walker_walk"], [0.2, 0.4, 0.6])  # over PPO's mean 250
    np.testing.assert_allclose(eval_rows[1].per_task["walker_walk"], [0.8, 1.0, 0.9])  # over PPO's mean 900
    assert np.isnan(eval_rows[0].per_task["walker_walk"][3])
    with pytest.raises(ValueError, match="score must be one of"):
        score_table(runs, score="test")
    report = write_report(root, score="eval")
    assert "closing deterministic evaluation" in open(report).read()
    with open(os.path.join(os.path.dirname(report), "scores.csv")) as handle:
        rows = {row["run_id"]: row for row in csv.DictReader(handle)}
    row = rows["prefppo/walker_walk/oracle/20x10/seed1"]
    assert row["score_key"] == "eval_return" and float(row["score"]) == pytest.approx(900.0)
    assert float(row["rollout/ep_rew_mean"]) == pytest.approx(100.0)
    # the evaluation records a return, no success rate: a Meta-World grid says which flag to pass
    _fake_run(root, "ppo", MW, 0, 0.5, metric="rollout/success_rate", eval_return=10.0)
    with pytest.raises(ValueError, match="metaworld_metric='return'"):
        score_table(load_runs(root), score="eval")
    assert score_table(load_runs(root), score="eval", metaworld_metric="return")[0][0].per_task[MW][0] == 1.0


def test_report_without_a_positive_ppo_baseline_says_so(tmp_path):
    root = str(tmp_path / "grid")
    _fake_run(root, "ppo", MW, 0, 0.0, metric="rollout/success_rate")
    _fake_run(root, "prefppo", MW, 0, 0.2, teacher="oracle", metric="rollout/success_rate")
    rows, skipped = score_table(load_runs(root))
    assert not rows and "nothing to normalise by" in skipped[MW]
    assert "left out" in open(write_report(root)).read()


def test_report_draws_rl2_adaptation(tmp_path):
    root = str(tmp_path / "grid")
    for seed, curve in enumerate([[1.0, 3.0, 4.0], [2.0, 5.0, 6.0]]):
        _fake_run(root, "rl2", "darkroom", seed, 10.0, rl2_curve=curve)
    unfinished = RunRecord(_fake_run(root, "rl2", "darkroom", 7, 10.0))
    unfinished.data["status"] = "failed"
    unfinished.save()
    assert len(load_runs(root)) == 2 and len(load_runs(root, include_unfinished=True)) == 3
    text = open(write_report(root)).read()
    try:
        import sb3_pref.rl2  # noqa: F401
    except ImportError:
        assert "RL2 adaptation skipped" in text
        return
    assert "adaptation_darkroom.png" in os.listdir(os.path.join(root, "report"))
    from sb3_pref.experiments.results import adaptation_curves

    mean, _, _ = adaptation_curves(load_runs(root))["darkroom"]["RL2"]
    np.testing.assert_allclose(mean, [1.5, 4.0, 5.0])


def test_status_counts_the_running_attempt(tmp_path, capsys):
    root = str(tmp_path / "grid")
    done = RunRecord(_fake_run(root, "ppo", "walker_walk", 0, 10.0))  # 60 s of ended attempts
    done.start_attempt("local", 0)  # ... and one started two minutes ago
    done.data["attempts"][-1]["started_at"] -= 120.0
    done.save()
    assert cli(["status", root]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.startswith("ppo/walker_walk/seed0"))
    assert line.split()[1] == "running"
    assert 2.9 <= float(line.split()[-2]) <= 3.1, line


def test_re_initial_batch_front_loads_the_first_round_of_a_grid_run(tmp_path):
    config = load_config(
        {
            "name": "front", "output_dir": str(tmp_path), "algorithms": ["prefppo"], "tasks": {"cartpole_balance": {}},
            "teachers": ["oracle"], "budgets": ["400x25"], "seeds": 1,
            "hyperparameters": {"total_timesteps": 1000, "re_initial_batch": 200},
        }
    )  # fmt: skip
    (run,) = config.runs()
    args = bpref_args(run)
    model = make_prefppo(args, make_env(args, None), verbose=0)
    assert (model.reward_model.mb_size, model.reward_model.initial_mb_size) == (25, 200)
    assert build_parser("B-Pref").parse_args([]).re_initial_batch is None  # B-Pref's equal rounds by default


def test_a_gymnasium_task_runs_in_a_grid_with_sb3_style_settings(tmp_path):
    settings = dict(
        TINY, total_timesteps=1500, gamma=0.9, clip_init=0.2, clip_anneal=False, use_sde=False, normalize=False,
        re_hidden_dim=32, re_num_layer=2, re_schedule="auto", re_initial_batch=12, re_input_norm=True,
    )  # fmt: skip
    config = load_config(
        tiny_grid(
            tmp_path, tasks={"Pendulum-v1": {"budgets": ["16x4"]}}, hyperparameters=settings, checkpoint_every=1000,
            eval_episodes=10,  # the default (Pendulum's 200-step episodes are cheap)
        )
    )  # fmt: skip
    ppo, pref = config.runs()
    args = bpref_args(pref)
    assert (args.gymnasium, args.metaworld, args.max_ep_len) == (True, False, 200)  # Pendulum's time limit
    model = make_prefppo(args, make_env(args, None), verbose=0)
    assert (model.gamma, model.clip_range(1.0), model.clip_range(0.1)) == (0.9, 0.2, 0.2)  # SB3's constant clip
    assert (model.reward_model.hidden_dim, model.reward_model.n_layers) == (32, 2)
    assert model.reward_model.input_norm and not build_parser("B-Pref").parse_args([]).re_input_norm  # B-Pref: raw
    assert bpref_args(ppo).clip_anneal is False and build_parser("B-Pref").parse_args([]).clip_anneal is True

    # The grid's two runs, trained in this process by execute_run as a grid worker trains them: worker processes
    # (2 interpreter start-ups here) are tested by test_grid_skips_finished_runs_and_resumes_a_killed_one, the
    # progress-lines and backends tests, with these same ppo and prefppo kinds.
    for planned in plan_grid(config):
        assert planned.state == "todo"
        execute_run(planned.run_dir, stdout_log=False)
    assert RunRecord(str(tmp_path / ppo.run_id)).status == FINISHED
    record = RunRecord(str(tmp_path / pref.run_id))
    assert record.status == FINISHED and record.data["attempts"][-1]["end_step"] >= 1500
    # the teacher answered from Pendulum's own reward: 12 labels at the first round, then rounds of 4, up to 16
    columns = read_csv_columns(str(tmp_path / pref.run_id / "progress.csv"))
    assert np.nanmax(columns["reward/total_feed"]) == 16
    # closed by a deterministic evaluation, what a user of the model gets (Pendulum's returns lie in [-1700, 0])
    final = record.data["final"]
    assert final["eval_episodes"] == 10 and -1700 < final["eval_return"] <= 0 and final["eval_cpu_time"] > 0
    with pytest.raises(ConfigError, match="Pendulum-v9"):
        load_config(tiny_grid(tmp_path, tasks=["Pendulum-v9"]))


def test_a_config_extends_another_and_a_task_has_its_own_teachers(tmp_path):
    base = tiny_grid(tmp_path / "runs", tasks=["walker_walk"], teachers=["oracle"])
    (tmp_path / "base.yaml").write_text(json.dumps(base))  # JSON is YAML
    (tmp_path / "extra.yaml").write_text(
        "extends: base.yaml\nname: extra\nalgorithms: [prefppo]\nseeds: [1]\n"
        "tasks:\n  walker_walk:\n    teachers: [mistake, noisy]\n"
    )
    extra = load_config(str(tmp_path / "extra.yaml"))
    assert (extra.name, extra.output_dir) == ("extra", str(tmp_path / "runs"))  # the base's folder
    assert [run.run_id for run in extra.runs()] == [
        "prefppo/walker_walk/mistake/20x10/seed1",
        "prefppo/walker_walk/noisy/20x10/seed1",
    ]
    assert extra.runs()[0].hyperparameters == load_config(base).runs()[1].hyperparameters  # the base's settings
    (tmp_path / "loop.yaml").write_text("extends: extra.yaml\n")
    with pytest.raises(ConfigError, match="extends another config itself"):
        load_config(str(tmp_path / "loop.yaml"))
    with pytest.raises(ConfigError, match=r"missing\.yaml does not exist"):
        load_config({**base, "extends": str(tmp_path / "missing.yaml")})
