"""HumanTeacher and MixedTeacher: blocking and asynchronous answers over HTTP, timeouts, late labels, agreement, PPO_REWARD."""

import threading
import time
from typing import Optional

import numpy as np
import pytest
from human_helpers import pair_rows, pendulum_segments, request, server_base, small_pendulum_model, wait_for
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, RewardModel, ScriptedTeacher
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.human import HumanFeedbackCallback, HumanTeacher, MixedTeacher, RenderStateWrapper


class Person(threading.Thread):
    """
    Answers the page's queries over HTTP like a browser would: polls ``api/next`` and answers with
    ``decide(teacher, query_id)``; a few malformed requests on the way must not disturb anything.
    """

    def __init__(self, teacher: HumanTeacher, decide, limit: int = 10**6, garbage: bool = False) -> None:
        super().__init__(daemon=True)
        self.teacher, self.decide, self.limit, self.garbage = teacher, decide, limit, garbage
        self.base, self.token = server_base(teacher.url), teacher.server.token
        self.given: dict[int, str] = {}
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self._answer_until_stopped()
        except BaseException as error:  # surfaced by the test through .error
            self.error = error

    def _answer_until_stopped(self) -> None:
        while not self.stop.is_set() and len(self.given) < self.limit:
            status, reply = request(self.base, "api/next", self.token)
            assert status == 200
            query = reply["query"]
            if query is None:
                time.sleep(0.02)
                continue
            if self.garbage:
                assert request(self.base, "api/answer", self.token, raw=b"{oops")[0] == 400
                assert request(self.base, "api/answer", "bad-token", {"query_id": query["id"], "choice": "left"})[0] == 403
                assert request(self.base, "api/answer", self.token, {"query_id": 10**9, "choice": "left"})[0] == 404
            choice = self.decide(self.teacher, query["id"])
            assert request(self.base, "api/answer", self.token, {"query_id": query["id"], "choice": choice})[0] == 200
            self.given[query["id"]] = choice


def by_true_return(teacher: HumanTeacher, query_id: int) -> str:
    """A 'person' preferring the segment with the higher true return (the data the page's clips show)."""
    seg_0, seg_1 = teacher.store.load_pairs([query_id])
    return "right" if seg_1.rewards.sum() > seg_0.rewards.sum() else "left"


CYCLE = ("left", "right", "equal", "skip")


def cycling(teacher: HumanTeacher, query_id: int) -> str:
    return CYCLE[(query_id - 1) % 4]


@pytest.fixture
def teacher_factory(tmp_path):
    made = []

    def make(**kwargs) -> HumanTeacher:
        # No correction window by default: scripted people change no answer (test_human_browser.py tests the window).
        kwargs = {"run_dir": tmp_path / "run", "verbose": 0, "video_format": "gif", "correction_window": 0, **kwargs}
        made.append(HumanTeacher("Pendulum-v1", **kwargs))
        return made[-1]

    yield make
    for teacher in made:
        teacher.close()


@pytest.fixture(scope="module")
def pairs():
    return pendulum_segments(4, 5, seed=0, torque=-2.0), pendulum_segments(4, 5, seed=20, torque=2.0)


def test_blocking_round_returns_the_answers_given_on_the_page(teacher_factory, pairs):
    teacher = teacher_factory(mode="blocking", timeout=30)
    person = Person(teacher, cycling, garbage=True)
    person.start()
    labels = teacher.label_pairs(*pairs)
    person.stop.set()
    assert person.error is None
    np.testing.assert_array_equal(labels, [0.0, 1.0, 0.5, np.nan])
    assert teacher.counters == {"asked": 4, "labelled": 3, "skipped": 1, "equal": 1, "flipped": 0}
    assert teacher.late_labels() is None  # everything was handed over already
    info = teacher.store.query_info(1)
    assert info["asked"] <= info["created"] <= info["answered"] and info["round"] == 1


def test_blocking_timeout_counts_unanswered_as_skipped_and_late_answers_arrive_once(teacher_factory, pairs):
    teacher = teacher_factory(mode="blocking", timeout=0.5)
    person = Person(teacher, cycling, limit=1)
    person.start()
    with pytest.warns(UserWarning, match="3 of 4 pairs were not answered within 0.5 s"):
        labels = teacher.label_pairs(*pairs)
    np.testing.assert_array_equal(labels, [0.0, np.nan, np.nan, np.nan])
    for query_id, choice in ((2, "right"), (3, "equal")):
        teacher.store.record_answer(query_id, choice)
    seg_0, seg_1, late = teacher.late_labels()
    np.testing.assert_array_equal(late, [1.0, 0.5])
    np.testing.assert_array_equal(seg_0.obs, pairs[0].obs[1:3])
    np.testing.assert_array_equal(seg_1.extras["render_state"], pairs[1].extras["render_state"][1:3])
    assert teacher.late_labels() is None
    assert teacher.counters["labelled"] == 3


def test_async_returns_at_once_and_hands_answers_over_later(teacher_factory, pairs):
    teacher = teacher_factory(mode="async")
    start = time.perf_counter()
    labels = teacher.label_pairs(*pairs)
    assert time.perf_counter() - start < 0.5 and np.isnan(labels).all()
    wait_for(lambda: teacher.store.counts()["queries"] == 4)
    assert teacher.late_labels() is None
    teacher.store.record_answer(4, "left")
    teacher.store.record_answer(1, "right")
    seg_0, _, late = teacher.late_labels()
    np.testing.assert_array_equal(late, [1.0, 0.0])
    np.testing.assert_array_equal(seg_0.actions, pairs[0].actions[[0, 3]])
    assert teacher.late_labels() is None

    # The hand-over is part of the state: a teacher restored from it does not hand them over again,
    # while a fresh teacher on the same folder (no checkpoint) receives every answer.
    state = teacher.state_dict()
    teacher.close()
    restored = teacher_factory(mode="async", serve=False)
    restored.load_state_dict(state)
    assert restored.late_labels() is None
    fresh = teacher_factory(mode="async", serve=False)
    np.testing.assert_array_equal(fresh.late_labels()[2], [1.0, 0.0])


def test_segments_without_render_states_get_a_clear_error(teacher_factory, pairs):
    teacher = teacher_factory(serve=False)
    bare = pairs[0].take(np.arange(4))
    bare.extras = {}
    with pytest.raises(ValueError, match="RenderStateWrapper"):
        teacher.label_pairs(bare, pairs[1])


def test_mixed_teacher_sends_a_sample_to_the_person_and_reports_agreement(teacher_factory):
    seg_0 = pendulum_segments(12, 5, seed=0, torque=0.0)
    seg_1 = pendulum_segments(12, 5, seed=40, torque=0.0)
    oracle = ScriptedTeacher.preset("oracle").label(seg_0.rewards, seg_1.rewards)
    human = teacher_factory(mode="blocking", timeout=30)
    mixed = MixedTeacher(ScriptedTeacher.preset("oracle"), human, human_fraction=0.5, seed=1)
    sampled = np.random.default_rng(1).random(12) < 0.5
    assert 2 <= sampled.sum() <= 10

    def contrary_on_first(teacher, query_id):  # agrees with the oracle except on the first pair shown
        choice = by_true_return(teacher, query_id)
        return {"left": "right", "right": "left"}[choice] if query_id == 1 else choice

    person = Person(human, contrary_on_first)
    person.start()
    labels = mixed.label_pairs(seg_0, seg_1)
    person.stop.set()
    assert person.error is None
    np.testing.assert_array_equal(labels[~sampled], oracle[~sampled])
    expected = oracle[sampled].copy()
    expected[0] = 1.0 - expected[0]
    np.testing.assert_array_equal(labels[sampled], expected)
    n_human = int(sampled.sum())
    assert mixed.agreement() == {"n": n_human, "agree": n_human - 1, "rate": (n_human - 1) / n_human}
    assert human.status()["agreement"]["n"] == n_human
    assert mixed.counters["asked"] == 12 and mixed.counters["labelled"] == 12
    state = mixed.state_dict()
    mixed.load_state_dict(state)
    assert mixed.counters["asked"] == 12


class LateOnlyTeacher(ScriptedTeacher):
    """Answers nothing in the round itself, and everything one round later (a slow person)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = None

    def label_pairs(self, seg_0, seg_1):
        self.waiting = (seg_0, seg_1, super().label_pairs(seg_0, seg_1))
        return np.full(len(seg_0), np.nan)

    def late_labels(self):
        late, self.waiting = self.waiting, None
        return late


def test_learner_stores_late_labels_and_refits_after_the_budget_is_spent():
    rng = np.random.default_rng(0)
    model = RewardModel(3, 1, size_segment=5, mb_size=10, hidden_dim=16, n_layers=1, seed=0)
    learner = PreferenceLearner(model, 1, teacher=LateOnlyTeacher(), max_feed=20, re_update=2, n_eval_pairs=8, seed=0)
    obs = rng.normal(size=(100, 1, 3)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(100, 1, 1)).astype(np.float32)
    learner.add_transitions(obs, actions, obs[..., 0], np.zeros((100, 1), dtype=bool))
    first = learner.query_round()
    assert len(learner.dataset) == 0 and "late_labels" not in first and "model_train_loss" not in first
    second = learner.query_round()
    assert second["late_labels"] == 10 and len(learner.dataset) == 10 and learner.budget_left == 0
    updates = model.n_updates
    third = learner.query_round()  # budget spent, but the last round's answers still arrive and train
    assert third["late_labels"] == 10 and "round_queries" not in third
    assert len(learner.dataset) == 20 and learner.labeled_feedback == 20 and model.n_updates > updates
    assert learner.query_round() == {}


def test_ppo_reward_learns_from_answers_given_over_http(teacher_factory):
    teacher = teacher_factory(mode="blocking", timeout=60, video_format="mp4")
    model = small_pendulum_model(teacher, n_envs=2, size_segment=10, mb_size=4, num_interaction=128, max_feed=8, re_update=3)
    person = Person(teacher, by_true_return, garbage=True)
    person.start()
    model.learn(384, callback=HumanFeedbackCallback(teacher))
    person.stop.set()
    person.join(timeout=10)
    assert person.error is None

    learner = model.pref_learner
    assert learner.total_feed == 8 and len(person.given) == 8
    assert teacher.store.answers() == person.given
    # Every answer is in the dataset once, with its value: left = 0.0, right = 1.0.
    dataset = learner.dataset
    seg_0, seg_1 = teacher.store.load_pairs(sorted(person.given))
    expected = {
        key: {"left": 0.0, "right": 1.0}[person.given[query_id]]
        for key, query_id in zip(pair_rows(seg_0.features, seg_1.features), sorted(person.given))
    }
    stored = dict(zip(pair_rows(dataset.features_0, dataset.features_1), dataset.labels.tolist()))
    assert len(dataset) == 8 and stored == expected
    assert model.reward_model.n_updates > 0
    progress = teacher.status()["progress"]
    assert progress["done"] is True and progress["labels"] == 8 and progress["timesteps"] == 384


def test_a_resumed_run_tells_the_person_what_is_still_asked(teacher_factory, pairs):
    teacher = teacher_factory(mode="async", serve=False)
    for _ in range(3):
        teacher.label_pairs(*[segments.take([0]) for segments in pairs])
    wait_for(lambda: teacher.store.counts()["queries"] == 3)
    assert teacher.status()["notice"] == ""
    state = teacher.state_dict()
    resumed = teacher_factory(mode="async", serve=False)
    resumed.load_state_dict({**state, "round": 1})  # a checkpoint taken after round 1
    assert "before query round 2" in resumed.status()["notice"]
    assert "the 2 pairs asked before the restart and not answered yet come first" in resumed.status()["notice"]
    # Until the learner has counted the carried pairs, a checkpoint is still one taken after round 1.
    assert resumed.state_dict()["round"] == 1
    resumed.store.record_answer(2, "left")
    assert "the 1 pair asked" in resumed.status()["notice"]
    resumed.store.record_answer(3, "skip")
    assert resumed.status()["notice"] == ""  # nothing it spoke of is left: the notice goes
    assert resumed.carried_queries() == 2 and resumed.carried_queries() == 0  # reported once
    assert resumed.state_dict()["round"] == 3
    # The status says how many queries were asked, even before any callback reported it.
    assert teacher.status()["progress"]["queries_asked"] == 3


def test_a_round_cut_by_a_crash_is_finished_on_the_page_not_asked_again(teacher_factory, tmp_path):
    """
    The "70 answers for a budget of 60" case: a blocking run resumed from a checkpoint taken before a round that the
    crash interrupted waits for that round's unanswered pairs (the same clips) instead of asking new ones, and the
    person never answers more than ``max_feed`` pairs.
    """
    first = teacher_factory(mode="async", serve=False)
    model = small_pendulum_model(first, max_feed=6, mb_size=3)
    model.learn(64)  # round 1: queries 1-3
    wait_for(lambda: first.store.counts()["queries"] == 3)
    for query_id in (1, 2, 3):
        first.store.record_answer(query_id, by_true_return(first, query_id))
    model.save(tmp_path / "checkpoint")
    model.learn(64, reset_num_timesteps=False)  # round 2: queries 4-6; one answered, then the process dies
    wait_for(lambda: first.store.counts()["queries"] == 6)
    first.store.record_answer(4, by_true_return(first, 4))
    first.close()

    resumed = teacher_factory(mode="blocking", timeout=60)
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=1, wrapper_class=RenderStateWrapper)
    model = PPO_REWARD.load(tmp_path / "checkpoint", env=env, teacher=resumed)
    assert model.pref_learner.total_feed == 3 and model.pref_learner.budget_left == 3
    person = Person(resumed, by_true_return)
    person.start()
    model.learn(128, reset_num_timesteps=False)  # the resumed round 2, then a round with the budget spent
    person.stop.set()
    person.join(timeout=10)
    assert person.error is None

    learner = model.pref_learner
    assert sorted(person.given) == [5, 6]  # the interrupted round's unanswered pairs, on the same clips
    assert resumed.store.counts() == {"queries": 6, "answered": 6, "pending": 0, "skipped": 0}  # none new
    assert learner.total_feed == 6 == learner.max_feed and learner.budget_left == 0
    assert len(learner.dataset) == 6 and learner.n_rounds == 2
    seg_0, seg_1 = resumed.store.load_pairs(list(range(1, 7)))
    assert sorted(pair_rows(learner.dataset.features_0, learner.dataset.features_1)) == sorted(
        pair_rows(seg_0.features, seg_1.features)
    )
