"""Shared by the human-feedback tests: real Pendulum segments with render states, and a tiny HTTP client."""

import contextlib
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.core.segments import SegmentBatch
from sb3_pref.human import RenderStateWrapper

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> Optional[str]:
    """Debian's chromium (``apt-get install chromium``), or ``$CHROMIUM``."""
    candidate = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return candidate if candidate and os.path.exists(candidate) else None


def pendulum_segments(n: int, horizon: int, seed: int, torque: float = 0.0) -> SegmentBatch:
    """
    ``n`` real Pendulum segments (one episode start each) with their render states; a constant
    ``torque`` makes the two sides of a pair visibly different (e.g. -2 swings left, +2 right).
    """
    env = RenderStateWrapper(gym.make("Pendulum-v1"))
    obs, actions, rewards, states = [], [], [], []
    for index in range(n):
        observation, _ = env.reset(seed=seed + index)
        segment = {"obs": [], "actions": [], "rewards": [], "states": []}
        for _ in range(horizon):
            action = np.array([torque], dtype=np.float32)
            segment["obs"].append(observation)
            observation, reward, _, _, info = env.step(action)
            segment["actions"].append(action)
            segment["rewards"].append(reward)
            segment["states"].append(info["render_state"])
        obs.append(segment["obs"])
        actions.append(segment["actions"])
        rewards.append(segment["rewards"])
        states.append(segment["states"])
    env.close()
    return SegmentBatch(
        obs=np.asarray(obs, dtype=np.float32),
        actions=np.asarray(actions, dtype=np.float32),
        rewards=np.asarray(rewards, dtype=np.float32),
        env_index=np.zeros(n, dtype=np.int64),
        start=np.arange(n, dtype=np.int64),
        extras={"render_state": np.asarray(states, dtype=np.float64)},
    )


def request(
    base: str,
    path: str,
    token: Optional[str] = None,
    body: Any = None,
    raw: Optional[bytes] = None,
    headers: Optional[dict] = None,
) -> tuple[int, Any]:
    """
    One HTTP request to ``base + path`` (POST if ``body``/``raw`` is given); the token goes in the header.

    :return: ``(status, parsed JSON or raw bytes)``
    """
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        all_headers["X-Feedback-Token"] = token
    req = urllib.request.Request(base + path, data=data, headers=all_headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, payload = error.code, error.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload


def server_base(url: str) -> str:
    """``http://127.0.0.1:PORT/`` from a page URL with its token."""
    return url.split("?")[0]


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll until ``condition()`` is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def pair_rows(features_0: np.ndarray, features_1: np.ndarray) -> list[bytes]:
    """One hashable key per pair, to compare dataset contents with stored queries regardless of order."""
    return [np.concatenate([a.ravel(), b.ravel()]).astype(np.float32).tobytes() for a, b in zip(features_0, features_1)]


def small_pendulum_model(
    teacher: Any, n_envs: int = 1, size_segment: int = 8, mb_size: int = 3, num_interaction: int = 64, max_feed: int = 30,
    re_update: int = 2, **kwargs: Any,
) -> PPO_REWARD:  # fmt: skip
    """
    A seconds-fast ``PPO_REWARD`` on Pendulum with render states recorded, asking ``teacher`` from the first
    rollout (``kwargs`` go to ``PPO_REWARD``, e.g. ``unsuper_flag=1, unsuper_step=64`` to pretrain first).
    """
    env = make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0, wrapper_class=RenderStateWrapper)
    reward_model = RewardModel(
        env.observation_space, env.action_space, size_segment=size_segment, mb_size=mb_size, hidden_dim=16, seed=0
    )
    return PPO_REWARD(
        "MlpPolicy",
        env,
        reward_model=reward_model,
        teacher=teacher,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        num_interaction=num_interaction,
        max_feed=max_feed,
        re_update=re_update,
        policy_kwargs={"net_arch": [16]},
        seed=0,
        **{"unsuper_flag": 0, **kwargs},
    )


@contextlib.contextmanager
def launched_chromium() -> Iterator[Any]:
    """Debian's headless chromium through Playwright (never Playwright's own download); one per test module."""
    from playwright.sync_api import sync_playwright  # the tests extra installs it; only chromium may be missing

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# The two screens the page must fit without scrolling to answer: a laptop and a phone.
VIEWPORTS = {
    "1280x800": {"viewport": {"width": 1280, "height": 800}},
    "390x844": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2},
}
# The element is inside the window as it is (no scrolling) and nothing covers its centre: a person can see and press it.
ON_SCREEN = """(selector) => {
    const element = document.querySelector(selector), box = element.getBoundingClientRect();
    const inside = box.width > 0 && box.top >= 0 && box.left >= 0 && box.bottom <= innerHeight && box.right <= innerWidth;
    const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return inside && (top === element || element.contains(top));
}"""

# Pair n is on screen and the page accepts answers for it (both clips play). The page ignores answers in
# the first 300 ms after that (against a double click answering a pair nobody saw): wait ANSWER_DELAY_MS.
PAIR_READY = """(n) => document.getElementById("pair-id").textContent.startsWith("Pair " + n + " ")
    && !document.getElementById("btn-left").disabled"""
ANSWER_DELAY_MS = 350


def teacher_with_pairs(run_dir: Any, n: int, horizon: int = 10, **kwargs: Any) -> Any:
    """An asynchronous :class:`HumanTeacher` serving ``n`` registered Pendulum pairs (left swings left, right swings right)."""
    from sb3_pref.human import HumanTeacher

    teacher = HumanTeacher("Pendulum-v1", run_dir=run_dir, **{"mode": "async", "verbose": 0, **kwargs})
    teacher.label_pairs(pendulum_segments(n, horizon, seed=0, torque=-2.0), pendulum_segments(n, horizon, seed=40, torque=2.0))
    wait_for(lambda: teacher.store.counts()["queries"] >= n)
    return teacher
