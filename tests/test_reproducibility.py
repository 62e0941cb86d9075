"""
Reproducibility and resume, measured: the same seed gives the same labels, reward model and logged
curves; save + load + continue keeps the budget, counters and labels of an uninterrupted run; a run
killed with SIGKILL resumes from its newest checkpoint with no label lost or asked twice.
"""

import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.callbacks import AtomicCheckpointCallback, list_checkpoints

TINY = dict(n_steps=32, batch_size=32, n_epochs=2, policy_kwargs={"net_arch": [16]}, device="cpu")
ROLLOUT = 32 * 2  # env steps per rollout (2 envs)


def build(seed: int = 3) -> PPO_REWARD:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=seed)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=4, hidden_dim=16)
    # The noisy "mistake" teacher and disagreement sampling: label noise and query choice both draw randomness.
    return PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="mistake", feed_type="disagreement", max_feed=24,
        num_interaction=ROLLOUT, unsuper_step=ROLLOUT * 2, re_update=5, seed=seed, **TINY,
    )  # fmt: skip


def dataset_arrays(model: PPO_REWARD) -> dict[str, np.ndarray]:
    dataset = model.pref_learner.dataset
    return {"features_0": dataset.features_0, "features_1": dataset.features_1, "labels": dataset.labels}


def logged_curves(folder: str) -> list[dict[str, str]]:
    with open(os.path.join(folder, "progress.csv")) as handle:
        # Wall-clock columns are the only ones allowed to differ.
        return [{k: v for k, v in row.items() if not k.startswith("time/") or k in ("time/iterations", "time/total_timesteps")}
                for row in csv.DictReader(handle)]  # fmt: skip


def test_same_seed_twice_gives_identical_labels_parameters_and_curves(tmp_path):
    runs = []
    for name in ("a", "b"):
        model = build()
        model.set_logger(configure(str(tmp_path / name), ["csv"]))
        model.learn(ROLLOUT * 7)
        runs.append(model)
    a, b = runs
    assert a.pref_learner.total_feed == 24 and a.pref_learner.teacher.counters["flipped"] > 0  # noise was drawn
    for key, value in dataset_arrays(a).items():
        np.testing.assert_array_equal(value, dataset_arrays(b)[key], err_msg=key)
    for p, q in zip(a.reward_model.ensemble.parameters(), b.reward_model.ensemble.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    for p, q in zip(a.policy.parameters(), b.policy.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    curves_a, curves_b = logged_curves(str(tmp_path / "a")), logged_curves(str(tmp_path / "b"))
    assert len(curves_a) == 7 and curves_a == curves_b
    # A different seed really gives a different run (else the equalities above prove nothing).
    other = build(seed=4)
    other.learn(ROLLOUT * 7)
    assert not np.array_equal(other.pref_learner.dataset.labels, a.pref_learner.dataset.labels)


def progress(model: PPO_REWARD) -> dict:
    learner = model.pref_learner
    return {
        "num_timesteps": model.num_timesteps,
        "total_feed": learner.total_feed,
        "n_rounds": learner.n_rounds,
        "teacher": dict(learner.teacher.counters),
        "interactions": model._num_interactions,
        "pretrain_done": model._pretrain_done,
        "unsuper_steps": model._unsuper_steps_done,
    }


def test_save_load_continue_matches_an_uninterrupted_run(tmp_path):
    whole = build()
    whole.learn(ROLLOUT * 8)

    first = build()
    first.learn(ROLLOUT * 4)  # past pretraining, two query rounds in
    labels_at_save = first.pref_learner.dataset.labels.copy()
    first.save(tmp_path / "model.zip")
    resumed = PPO_REWARD.load(tmp_path / "model.zip", env=make_vec_env("Pendulum-v1", n_envs=2, seed=3))
    assert progress(resumed) == progress(first)
    np.testing.assert_array_equal(resumed.pref_learner.dataset.labels, labels_at_save)
    resumed.learn(ROLLOUT * 4, reset_num_timesteps=False)

    # Budget, counters and rounds agree with the uninterrupted run; so do the labels asked before the save.
    assert progress(resumed) == progress(whole)
    n_saved = len(labels_at_save)
    for key, value in dataset_arrays(whole).items():
        np.testing.assert_array_equal(dataset_arrays(resumed)[key][:n_saved], value[:n_saved], err_msg=key)
    # Not bit-identical after the resume (documented in docs/howto-save-resume.md): SB3 saves neither the envs'
    # state nor torch's global generator, so the resumed run starts new episodes and samples other actions.
    assert len(resumed.pref_learner.dataset) == len(whole.pref_learner.dataset) == 24


WORKER = textwrap.dedent(
    """
    import sys
    from stable_baselines3.common.env_util import make_vec_env
    from sb3_pref import PPO_REWARD, RewardModel
    from sb3_pref.common.callbacks import AtomicCheckpointCallback, list_checkpoints

    folder, total = sys.argv[1], int(sys.argv[2])
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    found = list_checkpoints(folder)
    if found:
        model = PPO_REWARD.load(found[0].model, env=env)
    else:
        reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=2, hidden_dim=16)
        model = PPO_REWARD(
            "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=1000, num_interaction=64,
            unsuper_flag=0, re_update=3, n_steps=32, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]},
            seed=0, device="cpu",
        )
    model.learn(total - model.num_timesteps, callback=AtomicCheckpointCallback(64, folder), reset_num_timesteps=False)
    model.save(folder + "/final.zip")
    """
)


def test_kill_9_resumes_from_the_newest_checkpoint_without_losing_or_repeating_labels(tmp_path):
    folder, total = str(tmp_path / "checkpoints"), 64 * 14
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen([sys.executable, str(script), folder, str(total)], env=environ, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list_checkpoints(folder)) < 6 and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.05)
    assert worker.poll() is None, worker.stderr.read().decode()[-2000:]
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    worker.stderr.close()

    # Every checkpoint left behind is whole (written aside, then renamed), the newest included.
    found = list_checkpoints(folder)
    assert len(found) >= 6
    loaded = [PPO_REWARD.load(checkpoint.model) for checkpoint in found]
    newest = loaded[0]
    assert newest.num_timesteps == found[0].step and newest.num_timesteps < total
    # A checkpoint is taken after its rollout's query round: 2 labels per 64 steps, none pending.
    assert newest.pref_learner.total_feed == 2 * newest.num_timesteps // 64
    assert newest.pref_learner.teacher.counters["labelled"] == len(newest.pref_learner.dataset)

    subprocess.run([sys.executable, str(script), folder, str(total)], env=environ, check=True, timeout=300)
    final = PPO_REWARD.load(os.path.join(folder, "final.zip"))
    labels = final.pref_learner.dataset
    assert final.num_timesteps == total and final.pref_learner.total_feed == 2 * total // 64 == len(labels)
    # The labels of the checkpoint are kept as they were, and none of the pairs was asked twice.
    n_saved = len(newest.pref_learner.dataset)
    np.testing.assert_array_equal(labels.features_0[:n_saved], newest.pref_learner.dataset.features_0)
    pairs = np.concatenate([labels.features_0.reshape(len(labels), -1), labels.features_1.reshape(len(labels), -1)], axis=1)
    assert len(np.unique(pairs, axis=0)) == len(labels)


@pytest.mark.parametrize("keep", [None, 2])
def test_atomic_checkpoints_are_taken_after_the_query_round(tmp_path, keep):
    model = build()
    callback = AtomicCheckpointCallback(ROLLOUT * 2, str(tmp_path), keep=keep)
    model.learn(ROLLOUT * 7, callback=callback)
    found = list_checkpoints(str(tmp_path))
    assert [c.step for c in found] == ([384, 256, 128] if keep is None else [384, 256])
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    checkpoint = PPO_REWARD.load(found[0].model)
    # At 384 steps: pretraining took 128 and ended with a uniform round, then rounds at 192, 256, 320 and
    # 384 (the last one's labels are in: SB3's CheckpointCallback would save before it).
    assert checkpoint.pref_learner.n_rounds == 5 and checkpoint.pref_learner.total_feed == 20


DIES_WHILE_SAVING = textwrap.dedent(
    """
    import os, signal, sys, zipfile
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env
    from sb3_pref import PPO_REWARD, RewardModel
    from sb3_pref.common.callbacks import AtomicCheckpointCallback

    kind, folder = sys.argv[1], sys.argv[2]
    saves, writestr = [0], zipfile.ZipFile.writestr

    def dying_writestr(archive, name, *args, **kwargs):
        # SIGKILL in the middle of the third save: its data and weights are written, the zip's directory is not.
        name = getattr(name, "filename", name)
        saves[0] += name == "data"
        if saves[0] == 3 and name == "_stable_baselines3_version":
            os.kill(os.getpid(), signal.SIGKILL)
        return writestr(archive, name, *args, **kwargs)

    zipfile.ZipFile.writestr = dying_writestr
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=2, hidden_dim=16)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=100, num_interaction=32,
        unsuper_flag=0, n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [16]}, seed=0, device="cpu",
    )
    saver = AtomicCheckpointCallback(32, folder) if kind == "atomic" else CheckpointCallback(32, folder, "ckpt")
    model.learn(32 * 10, callback=saver)
    """
)


@pytest.mark.parametrize("kind", ["atomic", "sb3"])
def test_a_kill_during_a_save_leaves_no_torn_checkpoint(tmp_path, kind):
    script, folder = tmp_path / "worker.py", tmp_path / "checkpoints"
    script.write_text(DIES_WHILE_SAVING)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), kind, str(folder)], env=environ, timeout=120)
    assert done.returncode == -signal.SIGKILL
    names = sorted(os.listdir(folder))
    if kind == "atomic":
        # The torn write is the leftover .tmp; the two checkpoints before it are whole and found.
        assert [name for name in names if name.endswith(".tmp")] == ["ckpt_96.zip.tmp"]
        assert [c.step for c in list_checkpoints(str(folder))] == [64, 32]
        assert PPO_REWARD.load(list_checkpoints(str(folder))[0].model).pref_learner.total_feed == 4
    else:
        # SB3 writes in place: its newest checkpoint is the torn one (what AtomicCheckpointCallback avoids).
        assert names == ["ckpt_32_steps.zip", "ckpt_64_steps.zip", "ckpt_96_steps.zip"]
        with pytest.raises(ValueError, match=r"ckpt_96_steps.zip.*(truncated or corrupted|lacks|damaged member)"):
            PPO_REWARD.load(folder / "ckpt_96_steps.zip")
