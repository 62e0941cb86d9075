"""LabelStore durability: answers committed at once, never twice, kept through kill -9, handed over once after a restart."""

import json
import os
import signal
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from human_helpers import pair_rows, pendulum_segments, request, server_base, small_pendulum_model, wait_for
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, PreferenceDataset, RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.human import HumanTeacher, LabelStore, RenderStateWrapper
from sb3_pref.human.store import AnswerConflictError, UnknownQueryError

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def pairs():
    return pendulum_segments(4, 6, seed=0, torque=-2.0), pendulum_segments(4, 6, seed=50, torque=2.0)


def fill(store: LabelStore, pairs, n: int = 4) -> list[int]:
    seg_0, seg_1 = pairs
    return [store.add_query(seg_0, seg_1, i, (f"q{i}_0.mp4", f"q{i}_1.mp4"), round_index=1) for i in range(n)]


def test_answers_are_committed_once_and_first_answer_stands(tmp_path, pairs):
    path = tmp_path / "labels.sqlite"
    store = LabelStore(path)
    ids = fill(store, pairs)
    assert ids == [1, 2, 3, 4]
    assert store.record_answer(ids[0], "left") is True
    assert store.record_answer(ids[0], "left") is False  # a re-delivered answer is not stored again
    with pytest.raises(AnswerConflictError):
        store.record_answer(ids[0], "right")
    with pytest.raises(UnknownQueryError):
        store.record_answer(99, "left")
    with pytest.raises(ValueError):
        store.record_answer(ids[1], "maybe")
    store.record_answer(ids[2], "skip")
    # A second connection (as another process would open) sees the committed answers at once.
    other = LabelStore(path)
    assert other.answers() == {1: "left", 3: "skip"}
    assert other.counts() == {"queries": 4, "answered": 2, "pending": 2, "skipped": 1}
    assert [row["id"] for row in other.pending(limit=5)] == [2, 4]
    assert other.is_media("q1_1.mp4") and not other.is_media("labels.sqlite")
    other.close()
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2


def test_pairs_round_trip_and_export_to_npz_for_offline_learning(tmp_path, pairs):
    store = LabelStore(tmp_path / "labels.sqlite")
    ids = fill(store, pairs)
    seg_0, seg_1 = store.load_pairs([ids[2], ids[0]])
    np.testing.assert_array_equal(seg_0.obs, pairs[0].obs[[2, 0]])
    np.testing.assert_array_equal(seg_1.actions, pairs[1].actions[[2, 0]])
    np.testing.assert_array_equal(seg_1.rewards, pairs[1].rewards[[2, 0]])
    np.testing.assert_array_equal(seg_0.extras["render_state"], pairs[0].extras["render_state"][[2, 0]])
    for query_id, choice in zip(ids, ("left", "right", "equal", "skip")):
        store.record_answer(query_id, choice)

    assert store.export_npz(tmp_path / "labels.npz") == 3
    dataset = PreferenceDataset.load(tmp_path / "labels.npz")
    np.testing.assert_array_equal(dataset.labels, [0.0, 1.0, 0.5])  # the skipped pair is not a label
    np.testing.assert_array_equal(dataset.features_1, pairs[1].features[:3])

    # Offline reward learning from the exported file: the model learns that torque +2 (right) is preferred.
    model = RewardModel(3, 1, size_segment=6, mb_size=4, hidden_dim=16, n_layers=1, seed=0)
    fit = RewardTrainer(model).fit(dataset, np.random.default_rng(0), max_epochs=200, target_accuracy=0.99, schedule="bpref")
    assert fit["accuracy"] > 0.99
    store.close()


KILL_SCRIPT = """
import sys, time, json
sys.path.insert(0, {tests_dir!r})
from human_helpers import pendulum_segments
from sb3_pref.human import HumanTeacher

teacher = HumanTeacher("Pendulum-v1", run_dir=sys.argv[1], mode="async", verbose=0)
teacher.ask(pendulum_segments(5, 6, seed=0, torque=-2.0), pendulum_segments(5, 6, seed=9, torque=2.0))
while teacher.store.counts()["queries"] < 5:
    time.sleep(0.05)
print(json.dumps({{"url": teacher.url, "token": teacher.server.token}}), flush=True)
time.sleep(600)
"""


def test_answers_survive_kill_9_of_the_serving_process(tmp_path):
    script = tmp_path / "serve.py"
    script.write_text(KILL_SCRIPT.format(tests_dir=TESTS_DIR))
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(process.stdout.readline())
        base = server_base(info["url"])
        given = {1: "left", 2: "right", 4: "equal", 5: "skip"}
        for query_id, choice in given.items():
            status, reply = request(base, "api/answer", info["token"], {"query_id": query_id, "choice": choice})
            assert status == 200 and reply["stored"] is True
        # Answering twice (a retried request) changes nothing.
        assert request(base, "api/answer", info["token"], {"query_id": 1, "choice": "left"})[1]["stored"] is False
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL

    store = LabelStore(tmp_path / "run" / "labels.sqlite")
    assert store.answers() == given
    assert store.counts() == {"queries": 5, "answered": 4, "pending": 1, "skipped": 1}
    assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.close()


TRAIN_SCRIPT = """
import sys, time, json
sys.path.insert(0, {tests_dir!r})
from test_human_store import make_model, wait_for_queries
from sb3_pref.human import HumanTeacher

run_dir, checkpoints = sys.argv[1], sys.argv[2]
teacher = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", verbose=0)
model = make_model(teacher)
model.learn(64)                                   # round 1: three queries, asynchronous
wait_for_queries(teacher, 3)
model.save(checkpoints + "/a")
print(json.dumps({{"url": teacher.url, "token": teacher.server.token}}), flush=True)
sys.stdin.readline()                              # the person answers two of them
model.learn(64, reset_num_timesteps=False)        # round 2: those two join the dataset, three new queries
wait_for_queries(teacher, 6)
model.save(checkpoints + "/b")
print(json.dumps({{"dataset": len(model.pref_learner.dataset)}}), flush=True)
time.sleep(600)                                   # more answers arrive, then kill -9
"""


def make_model(teacher) -> PPO_REWARD:
    return small_pendulum_model(teacher)


def wait_for_queries(teacher: HumanTeacher, n: int) -> None:
    """Asynchronous rounds register their queries from the render thread: wait until ``n`` exist."""
    wait_for(lambda: teacher.store.counts()["queries"] >= n)


def resume(checkpoint: str, run_dir: str) -> PPO_REWARD:
    teacher = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", serve=False, verbose=0)
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=1, wrapper_class=RenderStateWrapper)
    return PPO_REWARD.load(checkpoint, env=env, teacher=teacher)


def dataset_labels_by_query(model: PPO_REWARD, store: LabelStore) -> dict[int, list[float]]:
    """For every answered query, the labels of the dataset rows holding its pair (one row expected)."""
    dataset = model.pref_learner.dataset
    rows = pair_rows(dataset.features_0, dataset.features_1)
    found = {}
    for query_id in store.answers():
        seg_0, seg_1 = store.load_pairs([query_id])
        (key,) = pair_rows(seg_0.features, seg_1.features)
        found[query_id] = [float(label) for row, label in zip(rows, dataset.labels) if row == key]
    return found


def test_resume_after_kill_9_hands_every_answer_to_the_dataset_once(tmp_path):
    run_dir, checkpoints = str(tmp_path / "run"), str(tmp_path)
    script = tmp_path / "train.py"
    script.write_text(TRAIN_SCRIPT.format(tests_dir=TESTS_DIR))
    process = subprocess.Popen(
        [sys.executable, str(script), run_dir, checkpoints], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        info = json.loads(process.stdout.readline())
        base, token = server_base(info["url"]), info["token"]
        for query_id, choice in ((1, "left"), (2, "right")):
            assert request(base, "api/answer", token, {"query_id": query_id, "choice": choice})[0] == 200
        process.stdin.write("go\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline()) == {"dataset": 2}
        # After checkpoint b: one answer to a round-1 query, two to round-2 queries (one skipped).
        for query_id, choice in ((3, "equal"), (4, "skip"), (5, "right")):
            assert request(base, "api/answer", token, {"query_id": query_id, "choice": choice})[0] == 200
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    store = LabelStore(os.path.join(run_dir, "labels.sqlite"))
    assert store.answers() == {1: "left", 2: "right", 3: "equal", 4: "skip", 5: "right"}
    expected = {1: [0.0], 2: [1.0], 3: [0.5], 4: [], 5: [1.0]}

    # Resumed from checkpoint b (answers 1 and 2 already in its dataset): the next round adds 3 and 5 only.
    model = resume(checkpoints + "/b.zip", run_dir)
    assert dataset_labels_by_query(model, store) == {1: [0.0], 2: [1.0], 3: [], 4: [], 5: []}
    model.learn(64, reset_num_timesteps=False)
    assert dataset_labels_by_query(model, store) == expected
    assert len(model.pref_learner.dataset) == 4
    model.save(tmp_path / "c")
    model.pref_learner.teacher.close()

    # Saved and resumed again: nothing is handed over twice.
    model = resume(str(tmp_path / "c.zip"), run_dir)
    model.learn(64, reset_num_timesteps=False)
    assert dataset_labels_by_query(model, store) == expected
    model.pref_learner.teacher.close()

    # Resumed from the older checkpoint a (empty dataset): every answer arrives, once.
    model = resume(checkpoints + "/a.zip", run_dir)
    assert len(model.pref_learner.dataset) == 0
    model.learn(64, reset_num_timesteps=False)
    assert dataset_labels_by_query(model, store) == expected
    model.pref_learner.teacher.close()
    store.close()


VERSION_1_SCHEMA = """
CREATE TABLE queries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, round INTEGER NOT NULL, asked REAL NOT NULL, created REAL NOT NULL,
    video_0 TEXT NOT NULL UNIQUE, video_1 TEXT NOT NULL UNIQUE,
    reference TEXT CHECK (reference IN ('left', 'right', 'equal', 'skip')), shown REAL, pair BLOB NOT NULL
);
CREATE TABLE answers (
    query_id INTEGER PRIMARY KEY REFERENCES queries(id),
    choice TEXT NOT NULL CHECK (choice IN ('left', 'right', 'equal', 'skip')), answered REAL NOT NULL
);
"""


def test_a_run_folder_of_the_first_schema_opens_and_gains_names_and_corrections(tmp_path, pairs):
    from sb3_pref.human.packing import pack_pair

    path = tmp_path / "labels.sqlite"
    with sqlite3.connect(path) as db:  # written as the first version of the store wrote it
        db.executescript(VERSION_1_SCHEMA)
        for index in range(3):
            db.execute(
                "INSERT INTO queries (round, asked, created, video_0, video_1, reference, shown, pair) "
                "VALUES (1, 1.0, 2.0, ?, ?, NULL, 3.0, ?)",
                (f"q{index}_0.mp4", f"q{index}_1.mp4", pack_pair(*pairs, index)),
            )
        db.execute("INSERT INTO answers (query_id, choice, answered) VALUES (1, 'left', 4.0), (2, 'skip', 5.0)")
    store = LabelStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert store.answers() == {1: "left", 2: "skip"} and store.counts()["pending"] == 1
    np.testing.assert_array_equal(store.load_pairs([1])[0].obs, pairs[0].obs[[0]])
    assert store.query_info(1)["shown"] == 3.0 and store.query_info(1)["labeller"] is None
    # New in version 2: names, second opinions, corrections until used.
    assert store.submit(3, "right", "Ann")["status"] == "new"
    assert store.submit(3, "left", "Ben") == {"status": "second_opinion", "choice": "right", "labeller": "Ann"}
    assert store.submit(3, "left", "Ann")["status"] == "conflict"  # Ann's own first answer stands
    assert store.people_agreement() == {"n": 1.0, "agree": 0.0, "rate": 0.0, "people": 2.0}
    assert store.correct_answer(3, "equal", "Ben") == "not_yours"
    assert store.correct_answer(3, "equal", "Ann") == "corrected"
    assert store.take_answers([3, 1]) == {3: "equal", 1: "left"}
    assert store.correct_answer(3, "left", "Ann") == "used" and store.answers()[3] == "equal"
    assert store.correct_answer(2, "left") == "corrected"  # never handed over: still open
    store.close()
    reopened = LabelStore(path)  # migrating twice changes nothing
    assert reopened.answers() == {1: "left", 2: "left", 3: "equal"} and reopened.labellers() == {"": 2, "Ann": 1}
    reopened.close()


def test_the_examples_timing_line_measures_only_the_wait_for_the_clip(tmp_path, pairs):
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location(
        "human_example", os.path.join(TESTS_DIR, "..", "examples", "human_feedback.py")
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    teacher = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", serve=False, verbose=0)
    try:
        ids = fill(teacher.store, pairs, n=2)
        time.sleep(0.5)  # the person is busy with earlier pairs while these wait in the queue
        for query_id in ids:
            teacher.store.mark_shown(query_id, load_seconds=0.04)
            teacher.store.record_answer(query_id, "left")
        report = example.timing_report(teacher)
        assert "playing 0.04 s after the page showed them" in report, report
    finally:
        teacher.close()


def test_without_a_terminal_the_example_keeps_the_result_on_the_page(tmp_path, capsys, monkeypatch):
    """Under nohup, input() meets end-of-file at once: the page must stay up for the person to see the result."""
    import importlib.util
    import io
    import time

    spec = importlib.util.spec_from_file_location(
        "human_example", os.path.join(TESTS_DIR, "..", "examples", "human_feedback.py")
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # what nohup gives: not a terminal, empty
    teacher = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", serve=False, verbose=0)
    try:
        start = time.monotonic()
        example.keep_page_open(teacher, 0.6)
        assert time.monotonic() - start >= 0.6
    finally:
        teacher.close()
    printed = capsys.readouterr().out
    assert "for 0 min" in printed and "python -m sb3_pref.human serve" in printed and str(tmp_path / "run") in printed
