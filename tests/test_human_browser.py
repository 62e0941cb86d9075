"""
A real headless Chromium opens the labelling page, sees both clips playing, answers by click and
by key, and the answers reach the reward model's dataset with the right values; during a real
PPO_REWARD run (on a laptop's and a phone's screen) the page tells the truth about progress, the step
training ends at, when the next round comes, the spent budget, what the teaching achieved and the end.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` Python package
(the ``tests`` extra); Playwright's own browser download is never used.
"""

import re
import threading

import gymnasium as gym
import numpy as np
import pytest
from human_helpers import (
    ANSWER_DELAY_MS,
    PAIR_READY,
    VIEWPORTS,
    chromium_path,
    launched_chromium,
    pair_rows,
    small_pendulum_model,
    wait_for,
)
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import RewardModel
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.human import HumanFeedbackCallback, HumanTeacher, RenderStateWrapper, SegmentRenderer

pytestmark = [
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian: apt-get install -y chromium)"),
    # one worker runs the module, so the module's browser is launched once (scripts/test.sh: --dist loadgroup)
    pytest.mark.xdist_group("chromium-browser"),
]


def fed_learner(teacher: HumanTeacher, n_steps: int = 120) -> PreferenceLearner:
    """A learner holding a real Pendulum rollout (random actions) with its render states."""
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=RenderStateWrapper)
    env.action_space.seed(0)
    obs = env.reset()
    records = {"obs": [], "actions": [], "rewards": [], "dones": [], "states": []}
    for _ in range(n_steps):
        action = np.array([env.action_space.sample()])
        next_obs, reward, done, infos = env.step(action)
        for key, value in zip(records, (obs, action, reward, done, np.stack([infos[0]["render_state"]]))):
            records[key].append(value)
        obs = next_obs
    model = RewardModel(env.observation_space, env.action_space, size_segment=20, mb_size=4, hidden_dim=16, seed=0)
    learner = PreferenceLearner(model, 1, teacher=teacher, max_feed=8, re_update=3, n_eval_pairs=8, seed=0)
    stacked = {key: np.stack(values) for key, values in records.items()}
    learner.add_transitions(
        stacked["obs"], stacked["actions"], stacked["rewards"], stacked["dones"], extras={"render_state": stacked["states"]}
    )
    return learner


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as launched:
        yield launched


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 820})
    yield context.new_page()
    context.close()


def test_person_answers_in_chromium_and_labels_reach_the_dataset(tmp_path, page):
    teacher = HumanTeacher(
        "Pendulum-v1", run_dir=tmp_path / "run", mode="blocking", timeout=60, verbose=0, instruction="Prefer high swings."
    )
    learner = fed_learner(teacher)
    outcome = {}

    def query_round() -> None:
        try:
            outcome["stats"] = learner.query_round()
        except BaseException as error:
            outcome["error"] = error

    training = threading.Thread(target=query_round, daemon=True)
    try:
        page.goto(teacher.url)
        page.wait_for_selector("#empty", state="visible")  # loaded, and nothing asked yet
        training.start()

        # (pair shown, how the person answers): a click, two keys, a click on "can't tell".
        answers = [("#btn-left", None), (None, "ArrowRight"), (None, "w"), ("#btn-skip", None)]
        for position, (button, key) in enumerate(answers, start=1):
            page.wait_for_function(PAIR_READY, arg=position, timeout=30_000)
            # Real decoded frames in both (a wait: the page restarts both clips together once they play, and
            # the seek back to the start drops readyState for a moment).
            page.wait_for_function("() => [left, right].every((v) => v.videoWidth > 0 && v.readyState >= 2)", timeout=5_000)
            if position == 1:
                page.wait_for_function("() => document.getElementById('pending').textContent === '4'")
                assert page.text_content("#answered") == "0"
                assert "paused until you answer round 1" in page.text_content("#training")
            page.wait_for_timeout(ANSWER_DELAY_MS)
            if button is not None:
                page.click(button)
            else:
                page.keyboard.press(key)
            wait_for(lambda position=position: teacher.store.counts()["answered"] == position)
        page.wait_for_function("() => document.getElementById('answered').textContent === '4'")
        # The round's last answer can still be changed: training takes the round correction_window (5 s) after it.
        assert training.is_alive()
        page.click("#change")
        page.wait_for_function(PAIR_READY, arg=4, timeout=30_000)
        page.wait_for_timeout(ANSWER_DELAY_MS)
        page.click("#btn-right")
        wait_for(lambda: teacher.store.answers().get(4) == "right")
        training.join(timeout=30)
        check_round(teacher, learner, outcome)
    finally:
        teacher.close()


def check_round(teacher: HumanTeacher, learner: PreferenceLearner, outcome: dict) -> None:
    assert "error" not in outcome, outcome.get("error")
    # Pair 4 was answered "can't tell", then changed to right before training took the round.
    assert teacher.store.answers() == {1: "left", 2: "right", 3: "equal", 4: "right"}
    # Left = seg_0 preferred = 0.0, right = 1.0, equal = 0.5 (a "can't tell" would be skipped, not stored).
    dataset = learner.dataset
    np.testing.assert_array_equal(dataset.labels, [0.0, 1.0, 0.5, 1.0])
    seg_0, seg_1 = teacher.store.load_pairs([1, 2, 3, 4])
    assert pair_rows(dataset.features_0, dataset.features_1) == pair_rows(seg_0.features, seg_1.features)
    assert outcome["stats"]["round_queries"] == 4 and teacher.counters["skipped"] == 0
    # Each pair was reported playing on screen before it was answered.
    for query_id in range(1, 5):
        info = teacher.store.query_info(query_id)
        assert info["asked"] <= info["created"] <= info["shown"] <= info["answered"]
    # The page reports how long it waited for both clips to play, from putting them on screen: not the time
    # the person spent on the pair before (the example's timing line is built from it).
    for query_id in range(2, 5):
        before, info = teacher.store.query_info(query_id - 1), teacher.store.query_info(query_id)
        assert info["load_seconds"] is not None and 0 <= info["load_seconds"] <= info["shown"] - before["answered"] + 0.25
    first = teacher.store.query_info(1)
    print(f"query to both clips playing on screen: {first['shown'] - first['asked']:.2f} s")


def test_gif_clips_show_without_a_video_encoder(tmp_path, page):
    teacher = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", mode="async", verbose=0, video_format="gif")
    try:
        segments = fed_learner(teacher).store.sample(2, 15, np.random.default_rng(0))
        teacher.label_pairs(segments.take([0]), segments.take([1]))
        page.goto(teacher.url)
        page.wait_for_function(
            """() => ["left-gif", "right-gif"].every((id) => {
                const image = document.getElementById(id);
                return !image.hidden && image.complete && image.naturalWidth > 0;
            }) && !document.getElementById("btn-right").disabled"""
        )
        assert page.is_hidden("#left") and page.is_hidden("#right")
        page.wait_for_timeout(400)
        page.keyboard.press("d")
        wait_for(lambda: teacher.store.answers() == {1: "right"})
        assert teacher.store.query_info(1)["shown"] is not None
    finally:
        teacher.close()


class Hold(BaseCallback):
    """Holds training at the first step where ``condition(model)`` holds, until the test has looked at the page."""

    def __init__(self, condition) -> None:
        super().__init__()
        self.condition = condition
        self.reached, self.release = threading.Event(), threading.Event()

    def _on_step(self) -> bool:
        if not self.release.is_set() and self.condition(self.model):
            self.reached.set()
            self.release.wait(60)
        return True


def turns(info: dict) -> float:
    """Pendulum's turn in one 0.05 s step, in turns (+ = counter-clockwise), from its recorded state."""
    return float(info["render_state"][1]) * 0.05 / (2 * np.pi)


def test_a_training_run_from_first_question_to_result(tmp_path, browser):
    from playwright.sync_api import expect

    # One window size: what this run checks is text, attributes and clips, the same at any size; answering in a
    # phone's window is test_human_page.py's (test_answering_fits_the_screen_..., test_phone_viewport_fits_...).
    page = browser.new_context(**VIEWPORTS["1280x800"]).new_page()
    teacher = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", mode="blocking", timeout=60, verbose=0)
    # One rollout of pretraining, then a round at the start of the next (step 64), then one every 128 steps at a
    # rollout end (192). 740 steps asked: learn stops at the end of the rollout that passes them, step 768.
    model = small_pendulum_model(teacher, max_feed=6, num_interaction=128, unsuper_flag=1, unsuper_step=64)
    between = Hold(lambda model: model.num_timesteps >= 100)
    spent = Hold(lambda model: model.pref_learner.total_feed >= model.pref_learner.max_feed)
    callback = HumanFeedbackCallback(teacher, behaviour=turns, behaviour_label="Turns per episode (+ = counter-clockwise)")
    outcome = {}

    def train() -> None:
        try:
            model.learn(740, callback=[callback, between, spent])
        except BaseException as error:
            outcome["error"] = error

    training = threading.Thread(target=train, daemon=True)
    try:
        page.goto(teacher.url)
        training.start()
        # Round 1 waits for the person: the page counts the queries asked and the step training waits at, of
        # the step training really ends at.
        page.wait_for_function(PAIR_READY, arg=1, timeout=30_000)
        expect(page.locator("#details")).to_have_text(
            "Step 64 of 768 \u00b7 reward model trained on 0 labels \u00b7 3 of 6 queries asked"
        )
        progress = page.get_by_role("progressbar", name="Training progress")
        expect(progress).to_have_attribute("aria-valuenow", "64")
        expect(progress).to_have_attribute("aria-valuemax", "768")
        for pair in range(1, 4):
            page.wait_for_function(PAIR_READY, arg=pair, timeout=30_000)
            page.wait_for_timeout(ANSWER_DELAY_MS)
            page.click("#btn-right" if pair % 2 else "#btn-left")
        # Mid-rollout after that round: its labels count at once, and the page says when the next clips come.
        assert between.reached.wait(30)
        expect(page.locator("#details")).to_have_text(
            "Step 100 of 768 \u00b7 reward model trained on 3 labels \u00b7 3 of 6 queries asked"
        )
        when = r"at step 192(, in about \d+ (s|min))?\."
        expect(page.locator("#training")).to_have_text(re.compile(r"new clips arrive at the next query round, " + when))
        expect(page.locator("#empty")).to_have_text(re.compile(r"New ones appear here by themselves, " + when))
        between.release.set()
        for pair in range(4, 7):
            page.wait_for_function(PAIR_READY, arg=pair, timeout=30_000)
            page.wait_for_timeout(ANSWER_DELAY_MS)
            page.click("#btn-right" if pair % 2 else "#btn-left")
        # Every question of the run is answered while training goes on: the page says so and promises no more clips.
        assert spent.reached.wait(30)
        expect(page.locator("#empty")).to_contain_text("You have answered every question of this run")
        expect(page.locator("#training")).to_contain_text("All 6 questions of this run have been asked")
        assert "New ones appear" not in page.inner_text("body")
        spent.release.set()
        training.join(timeout=60)
        assert "error" not in outcome, outcome.get("error")

        # The end: training finished at the step it said, with curves of what the person taught.
        expect(page.locator("#training")).to_have_text("Training has finished. Every answer is saved.")
        expect(page.locator("#details")).to_have_text(
            "Step 768 of 768 \u00b7 reward model trained on 6 labels \u00b7 6 of 6 queries asked"
        )
        expect(page.locator("#empty")).to_contain_text("Nothing more to judge")
        expect(page.locator("#note")).to_have_text("")  # no stale "Saved: ..." of the last answer
        assert "New ones appear" not in page.inner_text("body")
        learned = page.locator('#curves .chart[data-key="learned"] svg')
        label = r"Return per episode under the reward model learned from your answers: .*at step 768 \((\d+) points\)"
        expect(learned).to_have_attribute("aria-label", re.compile(label))
        assert int(re.search(label, learned.get_attribute("aria-label")).group(1)) >= 5  # a point per rollout from step 256
        behaviour = page.locator('#curves .chart[data-key="behaviour"] svg')
        expect(behaviour).to_have_attribute(
            "aria-label", re.compile(r"Turns per episode \(\+ = counter-clockwise\): .*at step 768")
        )
        # Pendulum's own reward is not what was taught: it is not plotted.
        assert page.locator("#curves .chart").count() == 2 and "own reward" not in page.inner_text("#curve-box")
        renderer = SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"))
        states = model.pref_learner.store.sample(1, 8, np.random.default_rng(0)).extras["render_state"][0]
        clip = renderer.write(states, str(tmp_path / "final"))
        renderer.close()
        teacher.show_result("Final policy: true return -1234.5", video=clip)
        expect(page.locator("#result-text")).to_have_text("Final policy: true return -1234.5")
        page.wait_for_function("() => document.getElementById('final-clip').videoWidth > 0", timeout=15_000)
        # A normal finish: the process exits and the page says so calmly, never "lost contact".
        teacher.close()
        expect(page.locator("#note")).to_contain_text("has exited", timeout=5_000)
        page.wait_for_timeout(3_200)
        assert "Lost contact" not in page.inner_text("body") and page.locator("#lost").is_hidden()
    finally:
        between.release.set()
        spent.release.set()
        teacher.close()
        page.context.close()
