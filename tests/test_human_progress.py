"""
What the labelling page says about training (``sb3_pref/human/progress.py`` and ``callbacks.py``): curves of
what the person teaches (the learned reward's return per episode, the script's behaviour measure, the
task's own return only where it is the goal), the step training really ends at, when the next query round
comes, the labels learned from right after a round, curves kept across a resume, and the readable
``summary`` of a run folder.
"""

import sys
import threading

import numpy as np
import pytest
from human_helpers import pendulum_segments, small_pendulum_model
from stable_baselines3.common.callbacks import BaseCallback

from sb3_pref.human import HumanFeedbackCallback, HumanTeacher, LabelStore
from sb3_pref.human.__main__ import main, serve_status
from sb3_pref.human.callbacks import LEARNED_LABEL, TASK_LABEL, episode_sums


class Answering(threading.Thread):
    """Answers every pending query through the label store, preferring the right clip, until stopped."""

    def __init__(self, teacher: HumanTeacher) -> None:
        super().__init__(daemon=True)
        self.teacher, self.stop = teacher, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for row in self.teacher.store.pending(limit=8):
                self.teacher.store.submit(row["id"], "right")
            self.stop.wait(0.02)


class Snapshots(BaseCallback):
    """The page's progress as the teacher reports it, at the first step at or after each of ``steps``."""

    def __init__(self, teacher: HumanTeacher, steps: list[int]) -> None:
        super().__init__()
        self.teacher, self.steps, self.seen = teacher, list(steps), {}

    def _on_step(self) -> bool:
        for step in self.steps:
            if step not in self.seen and self.num_timesteps >= step:
                self.seen[step] = dict(self.teacher.status()["progress"])
        return True


@pytest.fixture
def teacher(tmp_path):
    # No correction window: a script answers here, and changes no answer (test_human_browser.py tests the window).
    made = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", mode="blocking", timeout=60, serve=False, verbose=0,
                        video_format="gif", correction_window=0)  # fmt: skip
    person = Answering(made)
    person.start()
    yield made
    person.stop.set()
    made.close()


def test_episode_sums_carry_unfinished_episodes_across_rollouts():
    values = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    dones = np.array([[False, False], [True, False], [False, True]])
    finished, running = episode_sums(values, dones, np.array([100.0, 0.0]))
    # env 0: 100 carried in + 1 + 2 ends at step 1; env 1: 10 + 20 + 30 ends at step 2; env 0 has 3 running.
    assert finished == [103.0, 60.0] and running.tolist() == [3.0, 0.0]


def test_the_steps_end_and_next_round_are_what_training_will_do_and_labels_show_after_a_round(teacher):
    # Pretraining for one 64-step rollout: the first round comes at the start of the second rollout (step 64),
    # then every 128 steps at a rollout end (192, 320...). 700 steps asked: learn stops after the rollout at 704.
    model = small_pendulum_model(teacher, num_interaction=128, max_feed=6, unsuper_flag=1, unsuper_step=64)
    snapshots = Snapshots(teacher, [1, 100, 300])
    model.learn(700, callback=[HumanFeedbackCallback(teacher), snapshots])
    seen = snapshots.seen
    assert {step: progress["total_timesteps"] for step, progress in seen.items()} == {1: 704, 100: 704, 300: 704}
    assert seen[1]["total_timesteps_asked"] == 700
    assert seen[1]["next_round"] == 64 and seen[1]["labels"] == 0
    # Mid-rollout, right after the round that came at its start: its 3 labels, and the round after it.
    assert seen[100]["labels"] == 3 and seen[100]["next_round"] == 192 and seen[100]["timesteps"] == 100
    assert seen[300]["labels"] == 6 and seen[300]["next_round"] == 320
    assert seen[300]["steps_per_second"] > 0
    final = teacher.status()["progress"]
    assert final["timesteps"] == final["total_timesteps"] == 704 and final["done"] is True


def test_the_curves_plot_the_learned_return_and_the_behaviour_and_the_task_return_only_as_the_goal(teacher):
    # One round of 3 pairs at step 64 spends the budget: the reward model is the same from then on, so every
    # episode's learned return can be recomputed from the stored transitions.
    model = small_pendulum_model(teacher, num_interaction=64, max_feed=3, mb_size=3)
    steps_per_episode = HumanFeedbackCallback(teacher, behaviour=lambda info: 1.0, behaviour_label="Steps per episode")
    model.learn(448, callback=steps_per_episode)
    curves = {curve["key"]: curve for curve in teacher.status()["curves"]}
    assert sorted(curves) == ["behaviour", "learned"]  # the task's own reward is not what is taught here
    assert curves["learned"]["label"] == LEARNED_LABEL and curves["behaviour"]["label"] == "Steps per episode"
    # Pendulum's episodes are 200 steps; a point at every rollout end once an episode has ended.
    assert curves["behaviour"]["points"] == [[256, 200.0], [320, 200.0], [384, 200.0], [448, 200.0]]
    learner = model.pref_learner
    obs, actions, true_rewards = learner.store.last_transitions(448)
    learned = learner.predict_rewards(obs, actions)
    episode_returns = [float(learned[start : start + 200].sum()) for start in (0, 200)]
    points = curves["learned"]["points"]
    assert [step for step, _ in points] == [256, 320, 384, 448]
    assert points[0][1] == pytest.approx(episode_returns[0], rel=1e-5)
    assert points[-1][1] == pytest.approx(np.mean(episode_returns), rel=1e-5)

    # The same run goes on where the task's own reward is the goal: its return is plotted too, labelled so.
    model.learn(128, callback=HumanFeedbackCallback(teacher, task_reward_is_goal=True), reset_num_timesteps=False)
    curves = {curve["key"]: curve for curve in teacher.status()["curves"]}
    assert curves["task"]["label"] == TASK_LABEL and "the goal of this run" in TASK_LABEL
    true_returns = [float(true_rewards[start : start + 200].sum()) for start in (0, 200)]
    assert [step for step, _ in curves["task"]["points"]] == [512, 576]
    assert curves["task"]["points"][-1][1] == pytest.approx(np.mean(true_returns), rel=1e-4)
    assert [step for step, _ in curves["behaviour"]["points"]][:4] == [256, 320, 384, 448]  # kept across learn calls


def test_a_resumed_run_shows_its_curves_at_once_and_continues_them_from_its_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    labels = {"learned": LEARNED_LABEL}
    with HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0) as first:
        for step, value in ((100, 1.0), (200, 2.0), (300, 3.0)):
            first.add_curve_points(step, {"learned": value}, labels)
    # The process died after step 300; the run resumes from a checkpoint taken at step 200.
    with HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0) as resumed:
        assert resumed.status()["curves"][0]["points"] == [[100, 1.0], [200, 2.0], [300, 3.0]]
        with LabelStore(run_dir / "labels.sqlite") as store:
            assert serve_status(store, str(run_dir))["curves"][0]["points"] == [[100, 1.0], [200, 2.0], [300, 3.0]]
        resumed.add_curve_points(200, {}, {})  # what HumanFeedbackCallback does when training starts
        resumed.add_curve_points(264, {"learned": 5.0}, labels)
        assert resumed.status()["curves"] == [
            {"key": "learned", "label": LEARNED_LABEL, "note": "", "points": [[100, 1.0], [200, 2.0], [264, 5.0]],
             "refits": []}
        ]  # fmt: skip


def test_a_refit_breaks_the_learned_curve_and_its_returns_start_afresh(teacher):
    """
    The learned return is in the reward model's own units, which change at each refit: the callback marks the first
    point under a refitted model, and that point averages only episodes under the new model, never old ones.
    """
    model = small_pendulum_model(teacher, num_interaction=128, max_feed=12, mb_size=3)
    refit_steps: list[int] = []
    returns_at_448: list[float] = []

    class Fits(BaseCallback):  # the rollout ends after which the reward model has been refitted
        def _on_training_start(self) -> None:
            self.seen = 0

        def _on_rollout_end(self) -> None:
            learner = self.model.pref_learner
            if self.model.reward_model.n_updates != self.seen and len(learner.dataset):
                refit_steps.append(self.num_timesteps)
            self.seen = self.model.reward_model.n_updates
            if self.num_timesteps == 448:  # the two finished episodes' learned returns under the model fitted here
                obs, actions, _ = learner.store.last_transitions(448)
                rewards = learner.predict_rewards(obs, actions)
                returns_at_448.extend(float(rewards[start : start + 200].sum()) for start in (0, 200))

        def _on_step(self) -> bool:
            return True

    model.learn(1280, callback=[Fits(), HumanFeedbackCallback(teacher)])
    learned = next(curve for curve in teacher.status()["curves"] if curve["key"] == "learned")
    steps = [step for step, _ in learned["points"]]
    assert refit_steps == [64, 192, 320, 448]  # four rounds of 3 labels, each refitting at its rollout's end
    # The fits after the first point are marked at the first point at or after them (returns are computed at the
    # rollout's end, under the model fitted there; a point needs an episode to end under it: 200 steps). Here the fits
    # at 320 and 448 share the mark at 448 (no episode ended in between), and the fits before the first point at 256
    # mark nothing: the curve starts under the model of 192.
    assert steps[:3] == [256, 448, 512] and learned["refits"] == [448]
    # The marked point averages only the episode that ended under the new model (the window restarts at a refit),
    # not the episode that ended at 200 under an older one.
    assert learned["points"][1][1] == pytest.approx(returns_at_448[1], rel=1e-5)
    assert learned["points"][1][1] != pytest.approx(np.mean(returns_at_448), rel=1e-3)
    # Resumed from a checkpoint before the last mark, the marks after it go with the points.
    teacher.add_curve_points(learned["refits"][-1] - 1, {}, {})
    kept = next(curve for curve in teacher.status()["curves"] if curve["key"] == "learned")
    assert kept["refits"] == learned["refits"][:-1] and all(step < learned["refits"][-1] for step, _ in kept["points"])


def test_a_run_resumed_from_a_checkpoint_keeps_its_curve_up_to_the_checkpoint(tmp_path):
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref import PPO_REWARD
    from sb3_pref.human import RenderStateWrapper

    run_dir, steps = tmp_path / "run", {"behaviour": lambda info: 1.0, "behaviour_label": "Steps per episode"}
    teacher = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0, video_format="gif")
    model = small_pendulum_model(teacher, max_feed=3)
    checkpoint = CheckpointCallback(320, str(tmp_path / "checkpoints"), name_prefix="model")
    model.learn(384, callback=[HumanFeedbackCallback(teacher, **steps), checkpoint])
    teacher.close()  # the process ends after step 384; its last checkpoint is at step 320
    resumed = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0, video_format="gif")
    try:
        # The page of the resumed run shows the curve at once, before any step of the new process.
        assert resumed.status()["curves"][0]["points"] == [[256, 200.0], [320, 200.0], [384, 200.0]]
        env = make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=RenderStateWrapper)
        model = PPO_REWARD.load(tmp_path / "checkpoints" / "model_320_steps.zip", env=env, teacher=resumed)
        model.learn(64, callback=HumanFeedbackCallback(resumed, **steps), reset_num_timesteps=False)
        # From step 320 on the curve is drawn again by the resumed run (no episode has ended since, so no new point).
        assert resumed.status()["curves"][0]["points"] == [[256, 200.0], [320, 200.0]]
    finally:
        resumed.close()


def test_the_page_is_told_how_to_resume(tmp_path):
    checkpoints = []
    with HumanTeacher(
        "Pendulum-v1",
        run_dir=tmp_path / "run",
        serve=False,
        verbose=0,
        resume_command=lambda: f"train --resume {checkpoints[-1]}",
    ) as teacher:
        resume = teacher.status()["resume"]
        assert resume["command"] == ""  # the function failed (no checkpoint yet): the page says it in words
        assert resume["serve"] == f"python -m sb3_pref.human serve {teacher.run_dir}"
        checkpoints.append("model_4096_steps.zip")
        assert teacher.status()["resume"]["command"] == "train --resume model_4096_steps.zip"


def test_summary_prints_readable_lines(tmp_path, monkeypatch, capsys):
    store = LabelStore(tmp_path / "labels.sqlite")
    seg_0, seg_1 = pendulum_segments(3, 4, seed=0), pendulum_segments(3, 4, seed=5)
    for index, reference in enumerate(("left", "right", None)):
        store.add_query(seg_0, seg_1, index, (f"c{index}_0.gif", f"c{index}_1.gif"), round_index=1, reference=reference)
    store.close()
    monkeypatch.setattr(sys, "argv", ["sb3_pref.human", "summary", str(tmp_path)])
    main()
    assert capsys.readouterr().out.splitlines() == [
        "pairs asked: 3; answered: 0 (of them 0 can't tell); waiting: 3",
        "agreement with the scripted teacher: no pair to compare (no MixedTeacher, or none answered yet)",
        "agreement between people: no pair judged twice yet (names given: 0)",
        "answers by person: none yet",
    ]
    with LabelStore(tmp_path / "labels.sqlite") as store:
        store.submit(1, "left", "Ann")  # agrees with the scripted reference
        store.submit(2, "left", "Ann")  # does not
        store.submit(2, "left", "Ben")  # a second opinion: agrees with Ann
        store.submit(3, "skip")
    main()
    assert capsys.readouterr().out.splitlines() == [
        "pairs asked: 3; answered: 3 (of them 1 can't tell); waiting: 0",
        "agreement with the scripted teacher: 1 of 2 pairs (50%)",
        "agreement between people: 1 of 1 pairs (100%) judged twice, 2 people",
        "answers by person: Ann 2, (no name) 1",
    ]
