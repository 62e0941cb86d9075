"""AD: histories of unequal length, exact resumption of training, time-budgeted stages, the grid's named presets."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import configure

from sb3_pref.ad import AD, Histories, collect_histories, record_learner
from sb3_pref.ad.collect import CollectionIncomplete

SMALL = dict(embed_dim=16, n_layers=1, n_heads=2, ff_dim=32, n_updates=12, batch_size=4, seed=0)
ROOM = dict(size=5, episode_length=6, terminate_on_goal=True)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: the model settings of an AD preset that the grid and the example script both pass on unchanged
PRESET_ARCHITECTURE = (
    "seq_len", "embed_dim", "n_layers", "n_heads", "ff_dim", "attention_dropout", "residual_dropout", "recency_bias"
)  # fmt: skip


def unequal_parts() -> list[Histories]:
    """Q-learning histories that end on the goal: unfinished episodes are dropped, so their lengths differ."""
    parts = [record_learner(goal, "qlearning", 150, seed=i, env_kwargs=ROOM) for i, goal in enumerate([(0, 0), (4, 4)])]
    return [parts[0].truncated(parts[0].length - 37), parts[1]]  # at least 37 apart, whatever the learners did


def test_concatenate_keeps_every_transition_of_unequal_histories(tmp_path):
    parts = unequal_parts()
    merged = Histories.concatenate(parts)
    lengths = [part.length for part in parts]
    assert merged.history_lengths.tolist() == lengths and merged.length == max(lengths) and merged.min_length == min(lengths)
    for row, part in enumerate(parts):
        for name in ("observations", "actions", "rewards", "dones", "timesteps"):
            np.testing.assert_array_equal(getattr(merged, name)[row, : part.length], getattr(part, name)[0])
        np.testing.assert_array_equal(merged.episode_returns()[row], part.episode_returns()[0])
    assert merged.valid().sum() == sum(lengths)
    # The file keeps the lengths; shuffling permutes only recorded episodes, the padding stays at the end.
    merged.save(tmp_path / "h.npz")
    loaded = Histories.load(tmp_path / "h.npz")
    assert loaded.history_lengths.tolist() == lengths
    shuffled = merged.shuffled(np.random.default_rng(0))
    short = int(np.argmin(lengths))
    assert not shuffled.valid()[short, min(lengths) :].any()
    assert sorted(shuffled.episode_returns()[short]) == sorted(merged.episode_returns()[short])
    assert merged.truncated(min(lengths) - 5).history_lengths.tolist() == [min(lengths) - 5] * 2
    # A version-1 file (no lengths) still reads, as full histories.
    arrays = {name: getattr(parts[1], name) for name in ("observations", "actions", "rewards", "dones", "timesteps", "tasks")}
    header = json.dumps({"format_version": 1, "n_actions": 5, "meta": {}})
    np.savez_compressed(tmp_path / "v1.npz", header=np.array(header), **arrays)
    assert Histories.load(tmp_path / "v1.npz").history_lengths.tolist() == [parts[1].length]


def test_ad_samples_windows_only_inside_each_history():
    parts = unequal_parts()
    merged = Histories.concatenate(parts)
    seq_len = 20
    model = AD(merged, seq_len=seq_len, **{**SMALL, "batch_size": 256})
    lengths = merged.history_lengths
    last_start = {0: 0, 1: 0}
    for _ in range(12):
        rows, starts = (t.cpu().numpy() for t in model.window_sampler.starts())
        assert (starts >= 0).all() and (starts + seq_len <= lengths[rows]).all()
        for row in (0, 1):
            last_start[row] = max(last_start[row], int(starts[rows == row].max(initial=0)))
    # Every valid start is reachable: the longer history's last windows are sampled, not cut to the shorter one's.
    assert last_start == {row: int(lengths[row]) - seq_len for row in (0, 1)}
    with pytest.raises(ValueError, match="shortest history"):
        AD(merged, seq_len=min(lengths) + 1, **SMALL)


def test_padded_short_histories_start_at_their_first_step_and_padding_carries_no_loss(tmp_path):
    """pad_short_histories: a history shorter than the window is one window from its start; the padding never teaches."""
    merged = Histories.concatenate(unequal_parts())
    lengths = merged.history_lengths
    seq_len = int(lengths.max()) + 10  # longer than every history: the arrays are widened too
    with pytest.raises(ValueError, match="pad_short_histories=True"):
        AD(merged, seq_len=seq_len, **SMALL)
    with pytest.raises(TypeError, match="pad_short_histories"):
        AD(merged, seq_len=seq_len, pad_short_histories="yes", **SMALL)
    model = AD(merged, seq_len=seq_len, pad_short_histories=True, **{**SMALL, "batch_size": 64})
    rows, starts = (t.cpu().numpy() for t in model.window_sampler.starts())
    assert (starts == 0).all() and set(rows.tolist()) == {0, 1}
    # The mask is exactly "inside the history": a fresh model with the same seed draws the same rows first.
    padded = dict(seq_len=seq_len, pad_short_histories=True, **{**SMALL, "batch_size": 64})
    rows_first, _ = AD(merged, **padded).window_sampler.starts()
    obs, *_, real = AD(merged, **padded).window_sampler.batch()
    assert obs.shape[1] == seq_len
    assert real.sum(1).tolist() == [int(lengths[r]) for r in rows_first.tolist()]
    assert real[:, 0].all() and not real[:, -1].any()

    # Whatever the padding holds, the loss is the same: change every padded action and compare one update.
    def first_loss(pad_action: int) -> float:
        ad = AD(merged, seq_len=seq_len, pad_short_histories=True, **SMALL)
        data = ad.window_sampler.data
        for row, length in enumerate(lengths):
            data["actions"][row, int(length) :] = pad_action
        return ad.train_step()["loss"]

    assert first_loss(0) == first_loss(3)
    # A model trained this way saves, loads and keeps the flag.
    model.learn(2)
    model.save(tmp_path / "m.zip")
    loaded = AD.load(tmp_path / "m.zip", histories=merged)
    assert loaded.hyperparameters["pad_short_histories"] is True
    loaded.learn(1, reset_num_timesteps=False)


def test_updates_per_second_counts_only_this_call(tmp_path):
    histories = Histories.concatenate(unequal_parts())
    model = AD(histories, seq_len=12, **SMALL)
    model.learn(12)  # fast updates before the measured call

    class Slow(BaseCallback):
        def _on_step(self) -> bool:
            time.sleep(0.1)
            return True

    model.set_logger(configure(str(tmp_path), ["csv"]))
    start = time.perf_counter()
    model.learn(4, callback=Slow(), log_interval=4, reset_num_timesteps=False)
    wall = time.perf_counter() - start
    with open(tmp_path / "progress.csv") as handle:
        header, row = handle.read().split()
    rate = float(dict(zip(header.split(","), row.split(",")))["time/updates_per_s"])
    # 4 updates in this call, logged after 3 sleeps: at most 4 / 0.3 per second, at least 4 per wall time of the call.
    # Dividing the total count (16) by this call's time, the bug this checks, gives four times as much.
    assert 4 / wall <= rate <= 4 / 0.3


def test_save_load_then_learn_continues_exactly(tmp_path):
    histories = Histories.concatenate(unequal_parts())
    straight = AD(histories, seq_len=12, **SMALL)  # the default dropouts draw from torch's generator
    straight.learn(8)
    resumed = AD(histories, seq_len=12, **SMALL)
    resumed.learn(4)
    resumed.save(tmp_path / "half")
    th.rand(100)  # other work between the two calls moves torch's generator
    resumed = AD.load(tmp_path / "half", histories=histories)
    assert resumed.num_timesteps == 4
    resumed.learn(4, reset_num_timesteps=False)
    for a, b in zip(straight.policy.parameters(), resumed.policy.parameters()):
        assert th.equal(a, b)
    assert resumed._learning_rate(resumed._n_updates) == straight._learning_rate(straight._n_updates)


def test_collection_deadline_and_parallel_workers_give_the_same_histories(tmp_path):
    goals = [(0, 0), (4, 4)]
    kwargs = dict(learner="qlearning", steps=60, env_kwargs=ROOM)
    with pytest.raises(CollectionIncomplete, match="0 of 2"):
        collect_histories(goals, str(tmp_path / "late.npz"), deadline=time.monotonic() - 1, **kwargs)
    assert not os.listdir(tmp_path / "late.npz.parts")
    serial = collect_histories(goals, str(tmp_path / "serial.npz"), **kwargs)
    parallel = collect_histories(goals, str(tmp_path / "parallel.npz"), workers=2, **kwargs)
    for name in ("observations", "actions", "rewards", "lengths"):
        np.testing.assert_array_equal(getattr(serial, name), getattr(parallel, name))
    with pytest.raises(ValueError, match="workers"):
        collect_histories(goals, str(tmp_path / "x.npz"), workers=0, **kwargs)


def small_room_args(out) -> list[str]:
    """``train_AD.py``'s arguments for a quick run of the noisy_room preset into ``out``."""
    return ["--env", "darkroom", "--preset", "noisy_room", "--output-dir", str(out), "--learners-per-goal", "1",
            "--batch-size", "8", "--eval-trials", "8", "--verbose", "0"]  # fmt: skip


def test_train_ad_example_resumes_stage_by_stage_with_rl2(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, os.path.join(ROOT, "examples", "train_AD.py"), *small_room_args(out)]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *extra], capture_output=True, text=True, env=env, timeout=300)

    late = run("--n-updates", "6", "--time-budget", "0")
    assert late.returncode == 3 and "INCOMPLETE: histories" in late.stdout, late.stdout + late.stderr
    first = run("--n-updates", "6")
    assert first.returncode == 0 and "DONE" in first.stdout, first.stdout + first.stderr
    assert AD.load(out / "model.zip").num_timesteps == 6
    shard = next((out / "histories.npz.parts").iterdir())
    recorded = shard.stat().st_mtime_ns
    # A longer schedule continues the saved model on the recorded histories; RL2 joins on the same held-out trials.
    longer = run("--n-updates", "10", "--with-rl2", "--rl2-steps", "2000", "--rl2-cell", "lstm")
    assert longer.returncode == 0, longer.stdout + longer.stderr
    assert AD.load(out / "model.zip").num_timesteps == 10 and shard.stat().st_mtime_ns == recorded
    with open(out / "adaptation.csv") as handle:
        agents = {line.split(",")[0] for line in handle.read().splitlines()[1:]}
    assert {"AD", "RL2", "random"} <= agents
    with open(out / "summary.json") as handle:
        summary = json.load(handle)
    assert len(summary["curves"]["RL2"]) == len(summary["curves"]["AD"]) == 6  # the same trials of 6 episodes
    with open(out / "timings.json") as handle:
        assert {"histories_s", "model_s", "rl2_s", "evaluation_s"} <= set(json.load(handle))


def test_train_ad_example_shuffled_control_trains_on_permuted_episodes(tmp_path, monkeypatch, capsys):
    """``--shuffled`` trains on the same histories with episodes permuted; the source curve stays the ordered one."""
    from sb3_pref.ad.evaluation import learner_curve

    # The script's main() in this process (the resume test above keeps real processes): no process boundary is
    # tested here, and each interpreter cost ~5 s of importing torch and SB3.
    script = _train_ad_script(monkeypatch)
    models = {}
    for name, extra in (("ordered", []), ("shuffled", ["--shuffled"])):
        out = tmp_path / name
        command = ["train_AD.py", *small_room_args(out), "--n-updates", "4", *extra]
        monkeypatch.setattr(sys, "argv", command)
        script.main()  # exits (SystemExit) on an incomplete stage: the test fails with its message
        assert "DONE" in capsys.readouterr().out
        with open(out / "summary.json") as handle:
            curves = json.load(handle)["curves"]
        assert ("AD, shuffled histories" in curves) == (name == "shuffled") and ("AD" in curves) == (name == "ordered")
        ordered = Histories.load(out / "histories.npz")
        source = learner_curve(ordered, 6).summary()["mean"]
        np.testing.assert_allclose(curves["source learners (own training)"], source.round(3), atol=1e-9)
        models[name] = AD.load(out / "model.zip").policy.state_dict()
    # the same seed, data and schedule: only the episode order differs, so the weights must too
    assert any(not th.equal(models["ordered"][k], models["shuffled"][k]) for k in models["ordered"])


def test_noisy_room_presets_are_grid_presets_matching_the_library_presets():
    from sb3_pref.ad.presets import NOISY_ROOM, NOISY_ROOM_20
    from sb3_pref.experiments.config import ConfigError, load_config

    for name, preset in (("noisy_room", NOISY_ROOM), ("noisy_room_20", NOISY_ROOM_20)):
        config = load_config(dict(algorithms={"ad": {"preset": name, "eval_trials": 16}}, tasks=["darkroom"], seeds=1))
        (run,) = config.runs()
        s = run.hyperparameters
        room, model = preset["room"], preset["model"]
        assert s["preset"] == name and s["eval_trials"] == 16  # the config's own key still overrides the preset
        assert (s["size"], s["episode_length"], s["terminate_on_goal"], s["observation"]) == (
            room["size"],
            room["episode_length"],
            room["terminate_on_goal"],
            room["observation"],
        )
        assert (s["learner"], s["learners_per_goal"], s["n_test"], s["episodes_per_trial"]) == (
            preset["learner"],
            preset["learners_per_goal"],
            preset["n_test"],
            preset["episodes"],
        )
        assert s["learner_steps"] == s["max_history_steps"] == preset["episodes"] * room["episode_length"]
        assert s["anneal_fraction"] == preset["learner_kwargs"]["anneal_fraction"]
        assert s["anneal_after_reward"] is preset["learner_kwargs"].get("anneal_after_reward", False)
        renamed = dict(lr="learning_rate", min_lr="min_learning_rate", total_timesteps="n_updates")
        for key in (*PRESET_ARCHITECTURE, "batch_size", *renamed):
            assert s[key] == model[renamed.get(key, key)], (name, key)
    (default,) = load_config(dict(algorithms=["ad"], tasks=["darkroom"], seeds=1)).runs()
    assert default.hyperparameters["preset"] == "seed" and default.hyperparameters["learner"] == "a2c"
    assert default.hyperparameters["anneal_after_reward"] is False
    with pytest.raises(ConfigError, match="preset must be one of"):
        load_config(dict(algorithms={"ad": {"preset": "noisy"}}, tasks=["darkroom"], seeds=1))
    with pytest.raises(ConfigError, match="anneal_fraction"):
        load_config(dict(algorithms={"ad": {"preset": "noisy_room", "anneal_fraction": 0}}, tasks=["darkroom"], seeds=1))
    with pytest.raises(ConfigError, match="anneal_after_reward must be true or false"):
        load_config(
            dict(algorithms={"ad": {"preset": "noisy_room_20", "anneal_after_reward": "no"}}, tasks=["darkroom"], seeds=1)
        )


def _train_ad_script(monkeypatch):
    """examples/train_AD.py as a module (it is a script, not part of the package), its folder first on the path as
    ``python examples/train_AD.py`` puts it: the script imports its presets and flags from examples/helpers/."""
    import importlib.util

    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples"))
    spec = importlib.util.spec_from_file_location("train_AD", os.path.join(ROOT, "examples", "train_AD.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_train_ad_script_presets_match_the_library_presets(monkeypatch):
    """``examples/train_AD.py --preset noisy_room[_20]`` runs exactly :mod:`sb3_pref.ad.presets`' settings."""
    from sb3_pref.ad.presets import NOISY_ROOM, NOISY_ROOM_20

    script = _train_ad_script(monkeypatch)
    for name, preset in (("noisy_room", NOISY_ROOM), ("noisy_room_20", NOISY_ROOM_20)):
        monkeypatch.setattr(sys, "argv", ["train_AD.py", "--env", "darkroom", "--preset", name, "--output-dir", "x"])
        args = script.parse_args()
        room, model, learner = preset["room"], preset["model"], preset["learner_kwargs"]
        assert (args.size, args.episode_length, args.no_terminate_on_goal, args.observation) == (
            room["size"],
            room["episode_length"],
            not room["terminate_on_goal"],
            room["observation"],
        )
        assert (args.learner, args.learners_per_goal, args.n_test, args.episodes_per_trial) == (
            preset["learner"],
            preset["learners_per_goal"],
            preset["n_test"],
            preset["episodes"],
        )
        assert args.steps == args.max_history_steps == preset["episodes"] * room["episode_length"] == args.seq_len
        assert args.anneal_fraction == learner["anneal_fraction"]
        assert args.anneal_after_reward == learner.get("anneal_after_reward", False)
        for key in (*PRESET_ARCHITECTURE, "learning_rate", "min_learning_rate", "n_updates", "batch_size"):
            assert getattr(args, key) == model[key], (name, key)


def test_train_ad_script_first_success_views_replace_the_stride_views(monkeypatch, capsys):
    """``--first-success-views`` with a preset's episode stride is refused before any work, naming the fix."""
    script = _train_ad_script(monkeypatch)
    base = [
        "train_AD.py",
        "--env",
        "darkroom",
        "--preset",
        "a2c_room_150k",
        "--output-dir",
        "x",
        "--first-success-views",
        "50",
    ]
    monkeypatch.setattr(sys, "argv", base)
    with pytest.raises(SystemExit):
        script.parse_args()
    assert "pass --episode-stride 1" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", [*base, "--episode-stride", "1"])
    args = script.parse_args()
    assert (args.first_success_views, args.tail_episodes, args.tail_window, args.episode_stride) == (50, 30, 2000, 1)


def test_train_ad_script_dqn_room_preset_is_the_sixth_runs_command(monkeypatch):
    """``--preset dqn_room`` alone gives the options of benchmarks/ad/README.md's sixth run, and flags still override it."""
    script = _train_ad_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["train_AD.py", "--env", "darkroom", "--preset", "dqn_room", "--output-dir", "x"])
    args = script.parse_args()  # a2c_room_150k's episode stride would be refused beside first-success views
    run = dict(
        learner="dqn",
        steps=30_000,
        max_history_steps=30_000,
        learners_per_goal=2,
        episode_stride=1,
        first_success_views=100,
        tail_window=300,
        n_updates=15_000,
        eval_trials=230,
        seq_len=160,
        token_layout="transition",
        size=9,
        episode_length=20,
        n_test=23,
    )
    assert {key: getattr(args, key) for key in run} == run
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--eval-trials", "12", "--steps", "500"])
    args = script.parse_args()
    assert (args.eval_trials, args.steps, args.learner) == (12, 500, "dqn")
