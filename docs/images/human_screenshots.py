"""
Screenshots of the labelling page in each of its states, for docs/human_feedback.md, taken in Debian's
headless Chromium (through Playwright) from a real PPO_REWARD run on Pendulum and real run folders::

    MUJOCO_GL=osmesa PYTHONPATH=. python docs/images/human_screenshots.py [OUT_DIR]

Writes ``human_feedback_page.png`` and ``human_page_*.png`` (default: this folder). Takes 1.5 to 3.5 minutes on 2 CPU cores.
"""

import os
import shutil
import sys
import tempfile
import threading

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.core.segments import SegmentBatch
from sb3_pref.human import HumanFeedbackCallback, HumanTeacher, RenderStateWrapper, SegmentRenderer
from sb3_pref.human.__main__ import serve

INSTRUCTION = (
    "Prefer the clip where the pendulum turns counter-clockwise (towards the left at the top) the most: "
    "full turns are best, any turning to the right is worst."
)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
# Pair n is on screen and accepts answers; the page ignores answers in the first 300 ms after that.
READY = """(n) => document.getElementById("pair-id").textContent.startsWith("Pair " + n + " ")
    && !document.getElementById("btn-left").disabled"""
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 1}


def segments(n: int, seed: int, torque: float, horizon: int = 50) -> SegmentBatch:
    """``n`` real Pendulum segments under a constant torque, with their render states."""
    env = RenderStateWrapper(gym.make("Pendulum-v1"))
    records: dict[str, list] = {"obs": [], "actions": [], "rewards": [], "states": []}
    for index in range(n):
        observation, _ = env.reset(seed=seed + index)
        rows: dict[str, list] = {key: [] for key in records}
        for _ in range(horizon):
            action = np.array([torque], dtype=np.float32)
            rows["obs"].append(observation)
            observation, reward, _, _, info = env.step(action)
            rows["actions"].append(action)
            rows["rewards"].append(reward)
            rows["states"].append(info["render_state"])
        for key in records:
            records[key].append(rows[key])
    env.close()
    return SegmentBatch(
        obs=np.asarray(records["obs"], dtype=np.float32),
        actions=np.asarray(records["actions"], dtype=np.float32),
        rewards=np.asarray(records["rewards"], dtype=np.float32),
        env_index=np.zeros(n, dtype=np.int64),
        start=np.arange(n, dtype=np.int64),
        extras={"render_state": np.asarray(records["states"], dtype=np.float64)},
    )


def served_pairs(run_dir: str, n: int, **kwargs) -> HumanTeacher:
    """An asynchronous teacher serving ``n`` registered pairs (left turns one way, right the other)."""
    teacher = HumanTeacher("Pendulum-v1", run_dir=run_dir, mode="async", verbose=0, instruction=INSTRUCTION, **kwargs)
    teacher.label_pairs(segments(n, 0, -2.0), segments(n, 40, 2.0))
    while teacher.store.counts()["queries"] < n:
        threading.Event().wait(0.05)
    return teacher


def answer(page, pair: int, button: str) -> None:
    page.wait_for_function(READY, arg=pair, timeout=30_000)
    page.wait_for_timeout(350)
    page.click(button)


def shot(page, out: str, name: str, full_page: bool = True) -> None:
    """:param full_page: the whole page; False: the window only, as the person sees it without scrolling"""
    page.wait_for_timeout(700)  # the progress bar's transition and a few video frames
    # The waiting pair keeps the name the README links to.
    path = os.path.join(out, "human_feedback_page.png" if name == "pair" else f"human_page_{name}.png")
    page.screenshot(path=path, full_page=full_page)
    print("wrote", path)


class HoldAfterBudget(BaseCallback):
    """Holds training once every question is answered, so the "budget reached" state can be seen."""

    def __init__(self) -> None:
        super().__init__()
        self.reached, self.release = threading.Event(), threading.Event()

    def _on_step(self) -> bool:
        learner = self.model.pref_learner
        if learner.total_feed >= learner.max_feed and not self.teacher_busy():
            self.reached.set()
            self.release.wait(120)
        return True

    def teacher_busy(self) -> bool:
        return self.model.pref_learner.teacher.store.counts()["pending"] > 0


def final_policy(model: PPO_REWARD, path: str) -> tuple[str, str]:
    """One deterministic episode of the trained policy: its true return, and a clip of it."""
    env = RenderStateWrapper(gym.make("Pendulum-v1"))
    observation, _ = env.reset(seed=1000)
    states, total, done = [], 0.0, False
    while not done:
        action, _ = model.predict(observation, deterministic=True)
        observation, reward, terminated, truncated, info = env.step(action)
        states.append(info["render_state"])
        total, done = total + float(reward), terminated or truncated
    env.close()
    renderer = SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"))
    clip = renderer.write(np.asarray(states), path)
    renderer.close()
    turns = float(np.sum(np.asarray(states)[:, 1])) * 0.05 / (2 * np.pi)
    return f"Final policy: {turns:+.1f} turns (+ = counter-clockwise) in one {len(states)}-step episode", clip


def counter_clockwise(teacher: HumanTeacher, pair: int) -> str:
    """The button a person following the instruction presses: the clip that turns more counter-clockwise."""
    seg_0, seg_1 = teacher.store.load_pairs([pair])
    spin = [float(segments.extras["render_state"][0, :, 1].mean()) for segments in (seg_0, seg_1)]
    return "#btn-left" if spin[0] > spin[1] else "#btn-right"


def turn_per_step(info: dict) -> float:
    """Pendulum's turn in one 0.05 s step, in turns (+ = counter-clockwise), as in examples/human_feedback.py."""
    return float(info["render_state"][1]) * 0.05 / (2 * np.pi)


def training_run(browser, out: str, work: str) -> None:
    """Waiting pair with progress, budget reached, finished with the curves and the final policy's clip."""
    teacher = HumanTeacher("Pendulum-v1", run_dir=os.path.join(work, "run"), mode="blocking", timeout=120, verbose=0,
                           instruction=INSTRUCTION)  # fmt: skip
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0, wrapper_class=RenderStateWrapper)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=50, mb_size=3, hidden_dim=32, seed=0)
    model = PPO_REWARD("MlpPolicy", env, reward_model=reward_model, teacher=teacher, n_steps=256, batch_size=128,
                       n_epochs=2, num_interaction=1024, max_feed=6, unsuper_flag=0, re_update=5,
                       policy_kwargs={"net_arch": [32]}, seed=0)  # fmt: skip
    hold = HoldAfterBudget()
    feedback = HumanFeedbackCallback(
        teacher, behaviour=turn_per_step, behaviour_label="Turns per episode (+ = counter-clockwise)"
    )
    # 8,000 steps asked: training runs whole rollouts of 512 steps, to 8,192, and the page says so.
    thread = threading.Thread(target=lambda: model.learn(8000, callback=[feedback, hold]), daemon=True)
    page = browser.new_context(viewport=DESKTOP).new_page()
    try:
        page.goto(teacher.url)
        thread.start()
        for pair in range(1, 7):
            if pair == 5:
                page.wait_for_function(READY, arg=pair, timeout=60_000)
                shot(page, out, "pair", full_page=False)  # what a 1280x800 window shows: clips and buttons
            page.wait_for_function(READY, arg=pair, timeout=60_000)  # its clips are ready, so it is in the store
            answer(page, pair, counter_clockwise(teacher, pair))
        assert hold.reached.wait(120)
        page.wait_for_function("() => !document.getElementById('empty').hidden", timeout=10_000)
        shot(page, out, "budget_reached")
        hold.release.set()
        thread.join(timeout=300)
        text, clip = final_policy(model, os.path.join(work, "final"))
        teacher.show_result(text + " (a short demonstration run: 6 answers, 8,192 steps).", video=clip)
        page.wait_for_selector("#curves .chart", timeout=20_000)
        page.wait_for_function("() => document.getElementById('final-clip').videoWidth > 0", timeout=20_000)
        shot(page, out, "finished")
    finally:
        hold.release.set()
        teacher.close()


def page_states(browser, out: str, work: str) -> None:
    """A missing clip, the training process gone, correcting the last answer, two people, serve mode and a phone."""
    resume = "python examples/human_feedback.py --resume runs/human_feedback/checkpoints/model_8192_steps.zip"
    teacher = served_pairs(os.path.join(work, "broken"), 3, resume_command=resume)
    os.remove(os.path.join(teacher.media_dir, teacher.store.pending(2)[1]["video_1"]))
    page = browser.new_context(viewport=DESKTOP).new_page()
    page.goto(teacher.url)
    answer(page, 1, "#btn-left")
    page.wait_for_selector("#right-error", state="visible", timeout=20_000)
    shot(page, out, "missing_clip", full_page=False)
    teacher.close()  # the training process dies: answering stops and the page says how to go on
    page.wait_for_selector("#lost", state="visible", timeout=10_000)
    shot(page, out, "lost_contact", full_page=False)

    teacher = served_pairs(os.path.join(work, "people"), 3)
    pages = {}
    for name in ("Ann", "Ben"):
        pages[name] = browser.new_context(viewport=DESKTOP).new_page()
        pages[name].goto(teacher.url)
        pages[name].fill("#name", name)
        pages[name].press("#name", "Tab")
    ann, ben = pages["Ann"], pages["Ben"]
    answer(ann, 1, "#btn-left")
    answer(ben, 2, "#btn-right")
    answer(ann, 3, "#btn-left")
    ann.get_by_role("button", name="Change your answer to pair 3").click()
    ann.wait_for_function(READY, arg=3, timeout=20_000)
    shot(ann, out, "correcting")
    answer(ann, 3, "#btn-equal")
    answer(ben, 1, "#btn-right")  # a second opinion on Ann's pair: they disagree
    ann.wait_for_function(READY, arg=2, timeout=20_000)
    answer(ann, 2, "#btn-right")  # a second opinion on Ben's pair: they agree
    ben.wait_for_function(READY, arg=3, timeout=20_000)
    ben.wait_for_function("() => !document.getElementById('people').hidden")
    shot(ben, out, "second_opinion")
    teacher.close()

    phone_run = os.path.join(work, "phone")
    served_pairs(phone_run, 2, serve=False).close()
    server = serve(phone_run)
    phone = browser.new_context(**PHONE).new_page()
    phone.goto(server.url)
    phone.wait_for_function(READY, arg=1, timeout=20_000)
    shot(phone, out, "phone_serve", full_page=False)  # the window of a phone: both clips and the buttons, no scrolling
    server.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="sb3pref-shots-")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=ARGS)
            try:
                page_states(browser, out, work)
                training_run(browser, out, work)
            finally:
                browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
