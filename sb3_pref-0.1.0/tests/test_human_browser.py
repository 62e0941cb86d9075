"""
A real headless Chromium opens the labelling page, sees both clips playing, answers by click and
by key, and the answers reach the reward model's dataset with the right values.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` Python package
(the ``tests`` extra); Playwright's own browser download is never used.
"""

import contextlib
import threading

import numpy as np
import pytest
from human_helpers import CHROMIUM_ARGS, chromium_path, pair_rows, wait_for
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import RewardModel
from sb3_pref.common.learner import PreferenceLearner
from sb3_pref.human import HumanTeacher, RenderStateWrapper

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (Debian: apt-get install -y chromium)"
)

# Pair n is on screen and both of its clips have been playing for half a second (the page ignores
# answers in the first 300 ms, against double clicks answering a pair nobody saw).
PAIR_PLAYING = """(n) => {
    const clips = [document.getElementById("left"), document.getElementById("right")];
    return document.getElementById("pair-id").textContent.startsWith("Pair " + n + " ")
        && clips.every((v) => v.currentTime > 0.5 && !v.paused && v.videoWidth > 0 && v.readyState >= 2);
}"""


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


@contextlib.contextmanager
def chromium_page(tmp_path):
    """A page of Debian's headless chromium with a fresh profile."""
    from playwright.sync_api import sync_playwright  # the tests extra installs it; only chromium may be missing

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = context.new_page()
            page.set_viewport_size({"width": 1100, "height": 820})
            yield page
        finally:
            context.close()


def test_person_answers_in_chromium_and_labels_reach_the_dataset(tmp_path):
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
        with chromium_page(tmp_path) as page:
            page.goto(teacher.url)
            page.wait_for_selector("#empty", state="visible")  # loaded, and nothing asked yet
            training.start()

            # (pair shown, how the person answers): a click, two keys, a click on "can't tell".
            answers = [("#btn-left", None), (None, "ArrowRight"), (None, "w"), ("#btn-skip", None)]
            for position, (button, key) in enumerate(answers, start=1):
                page.wait_for_function(PAIR_PLAYING, arg=position, timeout=30_000)
                if position == 1:
                    page.screenshot(path=str(tmp_path / "page.png"))
                    assert page.text_content("#pending") == "4" and page.text_content("#answered") == "0"
                    assert "paused until you answer round 1" in page.text_content("#training")
                if button is not None:
                    page.click(button)
                else:
                    page.keyboard.press(key)
                wait_for(lambda position=position: teacher.store.counts()["answered"] == position)
            page.wait_for_function("() => document.getElementById('answered').textContent === '4'")
        training.join(timeout=30)
        check_round(teacher, learner, outcome)
    finally:
        teacher.close()


def check_round(teacher: HumanTeacher, learner: PreferenceLearner, outcome: dict) -> None:
    assert "error" not in outcome, outcome.get("error")
    assert teacher.store.answers() == {1: "left", 2: "right", 3: "equal", 4: "skip"}
    # Left = seg_0 preferred = 0.0, right = 1.0, equal = 0.5; "can't tell" is skipped (not stored).
    dataset = learner.dataset
    np.testing.assert_array_equal(dataset.labels, [0.0, 1.0, 0.5])
    seg_0, seg_1 = teacher.store.load_pairs([1, 2, 3])
    assert pair_rows(dataset.features_0, dataset.features_1) == pair_rows(seg_0.features, seg_1.features)
    assert outcome["stats"]["round_queries"] == 4 and teacher.counters["skipped"] == 1
    # Each pair was reported playing on screen before it was answered.
    for query_id in range(1, 5):
        info = teacher.store.query_info(query_id)
        assert info["asked"] <= info["created"] <= info["shown"] <= info["answered"]
    first = teacher.store.query_info(1)
    print(f"query to both clips playing on screen: {first['shown'] - first['asked']:.2f} s")


def test_gif_clips_show_without_a_video_encoder(tmp_path):
    teacher = HumanTeacher("Pendulum-v1", run_dir=tmp_path / "run", mode="async", verbose=0, video_format="gif")
    try:
        segments = fed_learner(teacher).store.sample(2, 15, np.random.default_rng(0))
        teacher.label_pairs(segments.take([0]), segments.take([1]))
        with chromium_page(tmp_path) as page:
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
