"""
Render states recorded during training re-render exactly the frames the env showed; clips encode and loop;
classic-control clips trail behind their moving parts, so a still frame shows the direction of motion.
"""

import ctypes.util
import os

import gymnasium as gym
import numpy as np
import pytest

from sb3_pref.human import RenderStateWrapper, SegmentRenderer, StateCodec, write_video
from sb3_pref.human.rendering import content_crop, motion_trail

needs_osmesa = pytest.mark.skipif(
    ctypes.util.find_library("OSMesa") is None and "MUJOCO_GL" not in os.environ,
    reason="offscreen MuJoCo rendering needs libosmesa6 (apt-get install libosmesa6) or MUJOCO_GL",
)


def live_and_replayed(make_env, n_steps: int, seed: int = 0):
    """Frames rendered live while stepping, and the same steps re-rendered from ``info["render_state"]``."""
    env = RenderStateWrapper(make_env(render_mode="rgb_array"))
    env.reset(seed=seed)
    env.action_space.seed(seed)
    live, states = [], []
    for _ in range(n_steps):
        live.append(env.render())  # the frame of the state the action is taken in
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        states.append(info["render_state"])
        assert not (terminated or truncated)
    env.close()
    renderer = SegmentRenderer(lambda: make_env(render_mode="rgb_array"))
    replayed = renderer.frames(np.stack(states))
    renderer.close()
    return np.stack(live), replayed, np.stack(states)


def test_render_state_is_the_state_before_the_step():
    env = RenderStateWrapper(gym.make("Pendulum-v1"))
    obs, _ = env.reset(seed=3)
    for _ in range(5):
        _, _, _, _, info = env.step(np.array([1.5], dtype=np.float32))
        theta, theta_dot = info["render_state"]
        # Pendulum's observation is (cos theta, sin theta, theta_dot) of its state.
        np.testing.assert_allclose([np.cos(theta), np.sin(theta), theta_dot], obs, atol=1e-6)
        obs = env.unwrapped._get_obs()
    assert info["render_state"].dtype == np.float64 and env.codec.kind == "classic"


def test_cartpole_frames_replay_exactly():
    live, replayed, states = live_and_replayed(lambda **kwargs: gym.make("CartPole-v1", **kwargs), 8)
    assert states.shape == (8, 4)
    np.testing.assert_array_equal(replayed, live)
    assert not np.array_equal(replayed[0], replayed[-1])  # the clip actually moves


@needs_osmesa
def test_dm_control_frames_replay_exactly():
    from sb3_pref.envs import make_dmcontrol_env

    live, replayed, states = live_and_replayed(lambda **kwargs: make_dmcontrol_env("cheetah_run", **kwargs), 6)
    assert replayed.shape == (6, 240, 320, 3) and states.shape == (6, 18)
    np.testing.assert_array_equal(replayed, live)


@needs_osmesa
def test_metaworld_dict_state_is_flattened_and_restored():
    from sb3_pref.envs import make_metaworld_env

    env = make_metaworld_env("button-press-topdown-v3", seed=0)
    env.reset(seed=0)
    codec = StateCodec(env)
    start = codec.get()
    for _ in range(3):
        env.step(env.action_space.sample())
    moved = codec.get()
    assert codec.kind == "get_state" and not np.allclose(start, moved)
    codec.set(start)
    np.testing.assert_array_equal(codec.get(), start)
    other = make_metaworld_env("button-press-topdown-v3", seed=5)  # another goal: restored from the state too
    other.reset(seed=5)
    other_codec = StateCodec(other)
    other_codec.set(moved)
    np.testing.assert_array_equal(other_codec.get(), moved)
    env.close()
    other.close()


@pytest.mark.parametrize("video_format", ["mp4", "webm", "gif"])
def test_clips_hold_every_frame(tmp_path, video_format):
    frames = np.zeros((12, 51, 67, 3), dtype=np.uint8)  # odd sides: cropped to even for yuv420p
    for index in range(12):
        frames[index, :, 5 * index : 5 * index + 5] = 255
    path = write_video(frames, str(tmp_path / "clip"), fps=20, video_format=video_format)
    assert path.endswith("." + video_format) and os.path.getsize(path) > 0
    if video_format == "gif":
        from PIL import Image

        with Image.open(path) as image:
            assert image.n_frames == 12 and image.info["loop"] == 0 and image.info["duration"] == 50
        return
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(path)
    meta = reader.__next__()
    decoded = [np.frombuffer(chunk, dtype=np.uint8).reshape(50, 66, 3) for chunk in reader]
    assert meta["size"] == (66, 50) and len(decoded) == 12
    # Lossy, but the moving bar is where it should be in every frame.
    for index, frame in enumerate(decoded):
        assert frame[:, 5 * index + 2].mean() > 150 and frame[:, (5 * index + 30) % 66].mean() < 100


def _pendulum_frames(turn_per_frame: float, n_frames: int = 12) -> np.ndarray:
    """Pendulum frames of a rod turning by ``turn_per_frame`` rad per frame (positive: counter-clockwise on screen)."""
    states = np.array([[0.3 + turn_per_frame * index, turn_per_frame * 20] for index in range(n_frames)])
    renderer = SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"))
    frames = renderer.frames(states)
    renderer.close()
    return frames


def _angles(mask: np.ndarray) -> np.ndarray:
    """Screen angles (counter-clockwise from the right, radians) of the pixels of ``mask`` about the pivot."""
    rows, columns = np.nonzero(mask)
    centre = (mask.shape[0] - 1) / 2
    return np.arctan2(centre - rows, columns - centre)


@pytest.mark.parametrize("turn", [0.2, -0.2])
def test_a_pendulum_clip_trails_behind_the_direction_of_turn(turn):
    frames = _pendulum_frames(turn)
    trailed = motion_trail(frames, length=5)
    assert trailed.shape == frames.shape and trailed.dtype == np.uint8
    np.testing.assert_array_equal(trailed[0], frames[0])  # nothing came before the first frame
    for index in (6, 11):
        rod = (frames[index].min(axis=-1) < 200) & (frames[index].max(axis=-1) > 150)  # red, not the black axle
        trail = np.any(trailed[index] != frames[index], axis=-1)
        assert trail.sum() > 2000 and not (trail & rod).any()  # a trail, drawn only off the rod
        # Relative to the rod, the trail lies on the side it came from: clockwise of it when it turns counter-clockwise.
        lag = np.median(np.angle(np.exp(1j * (_angles(trail) - np.median(_angles(rod))))))
        assert 0.25 < -np.sign(turn) * lag < 1.0, (turn, lag)
        # Fainter further back: the trail pixels are lighter than the rod, never darker.
        assert trailed[index][trail].astype(int).sum(axis=-1).min() > frames[index][rod].astype(int).sum(axis=-1).min()


def test_classic_control_clips_get_a_trail_and_others_can_opt_in(tmp_path):
    from PIL import Image

    states = np.array([[0.3 + 0.25 * index, 5.0] for index in range(10)])
    painted = []
    for trail in (None, 0):
        renderer = SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"), video_format="gif", trail=trail)
        assert renderer.trail == (5 if trail is None else 0)  # None: automatic, on for classic control
        path = renderer.write(states, str(tmp_path / f"clip_{trail}"))
        renderer.close()
        with Image.open(path) as image:
            image.seek(8)
            painted.append(int((np.asarray(image.convert("RGB")).min(axis=-1) < 240).sum()))
    assert painted[0] > 2 * painted[1], painted
    with pytest.raises(ValueError, match="trail"):
        SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"), trail=-1)


def _drawn(frames: np.ndarray) -> np.ndarray:
    """Pixels of any frame that differ from Pendulum's white background."""
    return (frames.min(axis=-1) < 215).any(axis=0)


def test_a_pair_is_cropped_to_what_it_draws_at_one_scale(tmp_path):
    from PIL import Image

    # A pair on a phone: a short swing near the bottom and a full turn; both clips get the crop holding both.
    small = np.array([[np.pi + 0.3 * np.sin(index / 3), 1.0] for index in range(12)])
    full = np.array([[0.55 * index, 5.0] for index in range(12)])
    renderer = SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"), video_format="gif")
    clips = [renderer.frames(small), renderer.frames(full)]
    assert renderer.crop is True  # automatic: on for classic control
    paths = renderer.write_clips([small, full], [str(tmp_path / "left"), str(tmp_path / "right")])
    renderer.close()
    height, width = clips[0].shape[1:3]
    top, bottom, left, right = content_crop(clips)
    # The frame's aspect ratio, at most 2x zoom, and nothing drawn in either clip falls outside the crop.
    assert (bottom - top) * width == (right - left) * height and bottom - top >= height // 2
    for frames in clips:
        drawn = _drawn(frames)
        assert drawn.sum() > 1000 and drawn[top:bottom, left:right].sum() == drawn.sum()
    # The full turn needs most of the circle the rod sweeps (length 1 in a 2.2-wide view): a real zoom all the same.
    assert bottom - top <= 0.7 * height, (top, bottom)
    for path in paths:
        with Image.open(path) as image:
            assert image.size == (right - left, bottom - top)
    # The small swing alone is cropped to the 2x limit, centred on what it draws.
    top, bottom, left, right = content_crop(clips[:1])
    assert bottom - top == height // 2 and _drawn(clips[0])[top:bottom, left:right].sum() == _drawn(clips[0]).sum()


def test_a_clip_whose_drawing_spans_the_frame_is_not_cropped():
    # CartPole's track runs across the whole frame: nothing to crop away.
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    frames = np.stack([env.render()] + [env.step(index % 2)[0] is not None and env.render() for index in range(5)])
    env.close()
    height, width = frames.shape[1:3]
    top, bottom, left, right = content_crop([frames])
    assert (left, right) == (0, width) and bottom - top >= height - 1
    with pytest.raises(ValueError, match="crop"):
        SegmentRenderer(lambda: gym.make("Pendulum-v1", render_mode="rgb_array"), crop="yes")
