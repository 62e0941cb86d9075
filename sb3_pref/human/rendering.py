"""
Turning recorded segments back into clips a person can watch.

Training envs never render: :class:`RenderStateWrapper` only records the simulator state before
every step (``info["render_state"]``, a flat float64 vector). When a segment is queried, a
:class:`SegmentRenderer` restores each recorded state in a separate render env, renders it, and
encodes the frames as a short looping video. So rendering costs nothing during rollouts and only
the few queried segments are ever drawn.
"""

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional, SupportsFloat, Union

import gymnasium as gym
import numpy as np

from sb3_pref.envs.optional import select_headless_gl_backend

RENDER_STATE_KEY = "render_state"
VIDEO_FORMATS = ("mp4", "webm", "gif")
#: At most 2x zoom when a classic-control clip is cropped to what it draws (see :func:`content_crop`).
MIN_CROP_SHARE = 0.5
#: Frames of motion trail a classic-control clip gets by default (see :func:`motion_trail`).
CLASSIC_TRAIL = 5


def _wrapper_attr(env: gym.Env, name: str) -> Any:
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        return None


class StateCodec:
    """
    Reads and restores the simulator state of one env as a single flat float64 vector.

    Supported, in this order: envs with ``get_state()``/``set_state(state)`` (this project's dm_control
    and Meta-World envs; a state that is a dict of arrays is flattened in key order), gymnasium
    MuJoCo envs (``qpos``, ``qvel``), and classic-control envs whose state is ``env.unwrapped.state``
    (Pendulum, CartPole, Acrobot, MountainCar).

    :param env: the env whose state is read or written
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self._get = _wrapper_attr(env, "get_state")
        self._set = _wrapper_attr(env, "set_state")
        self._layout: Optional[list[tuple[str, tuple[int, ...]]]] = None
        self._kind: Optional[str] = None

    @property
    def kind(self) -> str:
        """``get_state``, ``mujoco`` or ``classic`` (known once the env has been reset: Pendulum has no state before)."""
        if self._kind is None:
            base = self.env.unwrapped
            if callable(self._get) and callable(self._set):
                self._kind = "get_state"
            elif hasattr(base, "data") and hasattr(base, "init_qpos") and callable(getattr(base, "set_state", None)):
                self._kind = "mujoco"
            elif getattr(base, "state", None) is not None:
                self._kind = "classic"
            else:
                raise TypeError(
                    f"cannot read the simulator state of {base!r}: give the env get_state()/set_state(state) methods "
                    "(a flat array or a dict of arrays), or use a gymnasium MuJoCo or classic-control env (after reset())"
                )
        return self._kind

    def get(self) -> np.ndarray:
        """:return: a copy of the current state as a flat float64 vector"""
        base: Any = self.env.unwrapped
        if self.kind == "mujoco":
            return np.concatenate([base.data.qpos, base.data.qvel]).astype(np.float64)
        if self.kind == "classic":
            return np.array(base.state, dtype=np.float64).ravel()
        state = self._get()
        if isinstance(state, dict):
            self._layout = [(key, np.shape(value)) for key, value in state.items()]
            return np.concatenate([np.asarray(value, dtype=np.float64).ravel() for value in state.values()])
        return np.array(state, dtype=np.float64).ravel()

    def set(self, vector: np.ndarray) -> None:
        """:param vector: a state from :meth:`get` of an env of the same task"""
        vector = np.asarray(vector, dtype=np.float64)
        base: Any = self.env.unwrapped
        if self.kind == "mujoco":
            n_qpos = base.model.nq
            base.set_state(vector[:n_qpos], vector[n_qpos:])
        elif self.kind == "classic":
            base.state = vector.reshape(np.shape(base.state)).copy()
        else:
            if self._layout is None:
                self.get()  # learns whether the env's state is a dict, and its layout
            self._set(self._unflatten(vector) if self._layout is not None else vector)

    def _unflatten(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        assert self._layout is not None
        sizes = [int(np.prod(shape)) for _, shape in self._layout]
        if sum(sizes) != vector.size:
            raise ValueError(f"render state has {vector.size} values, this env's state has {sum(sizes)}: same task?")
        parts = np.split(vector, np.cumsum(sizes)[:-1])
        return {key: part.reshape(shape) for (key, shape), part in zip(self._layout, parts)}


class RenderStateWrapper(gym.Wrapper):
    """
    Puts the simulator state *before* each step into ``info["render_state"]`` (flat float64), so the
    frame of step ``t`` shows the observation the action of step ``t`` was taken in. Wrap every
    training env when a :class:`~sb3_pref.human.HumanTeacher` labels the queries::

        make_vec_env("Pendulum-v1", n_envs=4, wrapper_class=RenderStateWrapper)

    :param env: the env to wrap (it needs no render mode)
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.codec = StateCodec(env)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        _ = self.codec.kind  # an env whose state cannot be read fails here, before any training
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        state = self.codec.get()
        obs, reward, terminated, truncated, info = self.env.step(action)
        info[RENDER_STATE_KEY] = state
        return obs, reward, terminated, truncated, info


def _even_frame(frame: np.ndarray) -> np.ndarray:
    # H.264/VP8 in yuv420p need even sides; drop the odd last row/column rather than rescaling.
    height, width = frame.shape[:2]
    return np.ascontiguousarray(frame[: height - height % 2, : width - width % 2, :3])


def write_video(frames: np.ndarray, path: str, fps: float, video_format: str = "mp4") -> str:
    """
    Encode ``(T, height, width, 3)`` uint8 frames as a looping clip.

    ``mp4`` is H.264 (plays in every browser), ``webm`` is VP8, ``gif`` needs only Pillow. The
    video formats need ``imageio-ffmpeg`` (the ``human`` extra), which ships its own ffmpeg.

    :param path: destination file without the extension
    :return: the file written (``path`` + extension)
    """
    if video_format not in VIDEO_FORMATS:
        raise ValueError(f"video_format must be one of {', '.join(VIDEO_FORMATS)}, got {video_format!r}")
    frames = np.asarray(frames, dtype=np.uint8)
    target = f"{path}.{video_format}"
    if video_format == "gif":
        from PIL import Image

        images = [Image.fromarray(frame[..., :3]) for frame in frames]
        images[0].save(target, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
        return target
    import imageio_ffmpeg

    frames = np.stack([_even_frame(frame) for frame in frames])
    height, width = frames.shape[1:3]
    if video_format == "mp4":
        codec, params = "libx264", ["-preset", "veryfast", "-crf", "23", "-movflags", "+faststart"]
    else:
        codec, params = "libvpx", ["-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M"]
    writer = imageio_ffmpeg.write_frames(
        target,
        (width, height),
        fps=fps,
        codec=codec,
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        quality=None,
        macro_block_size=1,
        output_params=params,
        ffmpeg_log_level="error",
    )
    writer.send(None)
    for frame in frames:
        writer.send(frame.tobytes())
    writer.close()
    return target


def _background(frame: np.ndarray) -> np.ndarray:
    """The most common colour of a frame (every 7th pixel), as int16: a plain background seen by a fixed camera."""
    colours, counts = np.unique(frame.reshape(-1, 3)[::7], axis=0, return_counts=True)
    return colours[np.argmax(counts)].astype(np.int16)


def motion_trail(frames: np.ndarray, length: int = CLASSIC_TRAIL, strength: float = 0.55, threshold: int = 40) -> np.ndarray:
    """
    Draw behind every moving part faded copies of where it was in the ``length`` frames before, so a
    single frame shows which way things move (a pendulum's direction of turn, a cart's direction).

    A pixel belongs to a part where it differs from the background, the most common colour of the first
    frame: this assumes a plain background seen by a fixed camera (classic control), not a textured floor
    seen by a camera that follows the agent. Parts that never move are never copied.

    :param frames: ``(T, height, width, 3)`` uint8 frames
    :param length: frames of trail (0: the frames unchanged)
    :param strength: opacity of the newest copy; older copies fade linearly
    :param threshold: the largest channel difference from the background still counted as background
    :return: new frames of the same shape
    """
    frames = np.asarray(frames, dtype=np.uint8)
    out = frames.copy()
    if length <= 0 or len(frames) < 2:
        return out
    n_frames, height, width, _ = frames.shape
    flat = frames.reshape(n_frames, height * width, 3)
    # Only pixels that change at some time can hold a trail: the work shrinks to them (a pendulum's disc).
    changing = np.flatnonzero((flat.max(axis=0) - flat.min(axis=0)).max(axis=-1) > threshold)
    if changing.size == 0:
        return out
    pixels = flat[:, changing]  # (T, P, 3)
    # Not a per-pixel median: near a pendulum's pivot the rod is there most of the time, and would pass for
    # the background there (its absence then trailing as a white ghost over the rod).
    background = _background(frames[0])
    distance = np.abs(pixels.astype(np.int16) - background)
    moving = (distance[..., 0] > threshold) | (distance[..., 1] > threshold) | (distance[..., 2] > threshold)
    # age[t, p]: how many frames back the copy shown at pixel p of frame t was taken (0: none). The oldest
    # copy first, so that where copies overlap the newest shows.
    age = np.zeros(moving.shape, dtype=np.int16)
    for k in range(min(length, n_frames - 1), 0, -1):
        age[k:] = np.where(moving[:-k] & ~moving[k:], np.int16(k), age[k:])
    times, columns = np.nonzero(age)
    opacity = (strength * (1.0 - (age[times, columns] - 1) / length)).astype(np.float32)[:, None]
    here = pixels[times, columns].astype(np.float32)
    copy = pixels[times - age[times, columns], columns].astype(np.float32)
    blended = np.round(here + opacity * (copy - here)).astype(np.uint8)
    out.reshape(n_frames, height * width, 3)[times, changing[columns]] = blended  # a view: writes into out
    return out


def content_crop(
    clips: Sequence[np.ndarray], threshold: int = 40, pad: float = 0.06, min_share: float = MIN_CROP_SHARE
) -> tuple[int, int, int, int]:
    """
    The part of the frame that holds everything drawn in any frame of any of ``clips`` (a pendulum's whole swing, a
    cart's track), with the frame's own aspect ratio: clipped to it, a small agent in a large plain frame fills the
    clip. The same crop for the clips of one pair keeps them at one scale, so they stay comparable.

    Drawn pixels are those that differ from the background, the most common colour of the first frame: this assumes
    a plain background seen by a fixed camera (classic control), as :func:`motion_trail` does.

    :param clips: ``(T, height, width, 3)`` uint8 frames, all of one size
    :param threshold: the largest channel difference from the background still counted as background
    :param pad: margin around the drawn part, as a share of the frame's size
    :param min_share: the crop keeps at least this share of the frame's width and height (at most 1 / it zoom)
    :return: ``(top, bottom, left, right)`` pixel bounds (the whole frame when nothing is drawn)
    """
    height, width = clips[0].shape[1:3]
    background = _background(clips[0][0])
    drawn = np.zeros((height, width), dtype=bool)
    for frames in clips:
        for start in range(0, len(frames), 8):  # in chunks: a clip in int16 would be ~75 MB at 500x500x50
            chunk = np.asarray(frames[start : start + 8], dtype=np.int16)
            drawn |= (np.abs(chunk - background).max(axis=-1) > threshold).any(axis=0)
    rows, columns = np.flatnonzero(drawn.any(axis=1)), np.flatnonzero(drawn.any(axis=0))
    if rows.size == 0:
        return 0, height, 0, width
    centre_y, centre_x = (rows[0] + rows[-1] + 1) / 2, (columns[0] + columns[-1] + 1) / 2
    # The share of the frame the drawn part needs on either axis, padded; the crop keeps the frame's aspect ratio.
    needed = max(float(rows[-1] + 1 - rows[0]) / height, float(columns[-1] + 1 - columns[0]) / width) + 2 * pad
    share = min(max(needed, min_share), 1.0)
    crop_h, crop_w = round(share * height) // 2 * 2, round(share * width) // 2 * 2  # even sizes: H.264 needs them
    top = int(np.clip(round(centre_y - crop_h / 2), 0, height - crop_h))
    left = int(np.clip(round(centre_x - crop_w / 2), 0, width - crop_w))
    return top, top + crop_h, left, left + crop_w


def default_video_format() -> str:
    """:return: ``mp4`` when imageio-ffmpeg is installed, else ``gif``"""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return "gif"
    return "mp4"


class SegmentRenderer:
    """
    Re-renders segments from their recorded states with a dedicated render env, and writes clips.

    The render env is created at the first render, in the calling thread (OpenGL contexts belong to
    the thread that made them), and reset once; each frame is ``set_state`` then ``render()``.

    :param env_fn: builds the render env, with ``render_mode="rgb_array"``
    :param fps: clip frame rate; None uses the env's ``metadata["render_fps"]`` (real time), else 30
    :param video_format: ``mp4``, ``webm`` or ``gif``; None picks mp4 if imageio-ffmpeg is installed
    :param trail: frames of :func:`motion_trail` drawn into the clips :meth:`write` encodes (not into
        :meth:`frames`); None: ``CLASSIC_TRAIL`` for classic-control envs (a fixed camera over a plain
        background), 0 for the others
    :param crop: clip the written clips to what they draw (:func:`content_crop`, one crop for the clips written
        together, e.g. a pair); None: on for classic-control envs (a small pendulum in a large plain frame), off for
        the others (a camera that follows the agent frames it already)
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        fps: Optional[float] = None,
        video_format: Optional[str] = None,
        trail: Optional[int] = None,
        crop: Optional[bool] = None,
    ) -> None:
        if crop is not None and not isinstance(crop, bool):
            raise ValueError(f"crop must be True, False or None (automatic), got {crop!r}")
        self._crop = crop
        if trail is not None and (isinstance(trail, bool) or not isinstance(trail, int) or trail < 0):
            raise ValueError(f"trail must be a number of frames >= 0, or None (automatic), got {trail!r}")
        self.env_fn = env_fn
        self._trail = trail
        self.video_format = video_format or default_video_format()
        if self.video_format not in VIDEO_FORMATS:
            raise ValueError(f"video_format must be one of {', '.join(VIDEO_FORMATS)}, got {self.video_format!r}")
        self._fps = fps
        self._env: Optional[gym.Env] = None
        self._codec: Optional[StateCodec] = None
        #: Cumulative time spent in ``set_state`` + ``render()`` and the frames drawn (render cost per frame).
        self.render_seconds = 0.0
        self.frames_rendered = 0

    @property
    def fps(self) -> float:
        if self._fps is not None:
            return float(self._fps)
        metadata = self._env.metadata if self._env is not None else {}
        return float(metadata.get("render_fps") or 30)

    @property
    def trail(self) -> int:
        """Frames of motion trail in the written clips (the automatic choice is known once the env exists)."""
        if self._trail is not None:
            return self._trail
        return CLASSIC_TRAIL if self._ensure_env().kind == "classic" else 0

    @property
    def crop(self) -> bool:
        """Whether written clips are cropped to what they draw (the automatic choice is known once the env exists)."""
        if self._crop is not None:
            return self._crop
        return self._ensure_env().kind == "classic"

    def _ensure_env(self) -> StateCodec:
        if self._codec is None:
            select_headless_gl_backend()
            if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
                # pygame (classic control) draws rgb_array frames without a display; this stops SDL looking for one.
                os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            env = self.env_fn()
            if getattr(env, "render_mode", None) != "rgb_array":
                raise ValueError(f"the render env must be created with render_mode='rgb_array', got {env.render_mode!r}")
            env.reset(seed=0)
            self._env, self._codec = env, StateCodec(env)
        return self._codec

    def frames(self, states: np.ndarray) -> np.ndarray:
        """
        :param states: ``(H, state_dim)`` states recorded by :class:`RenderStateWrapper`
        :return: ``(H, height, width, 3)`` uint8 frames
        """
        codec = self._ensure_env()
        assert self._env is not None
        frames = []
        start = time.perf_counter()
        for state in np.asarray(states, dtype=np.float64):
            codec.set(state)
            frames.append(np.asarray(self._env.render(), dtype=np.uint8))
        self.render_seconds += time.perf_counter() - start
        self.frames_rendered += len(frames)
        return np.stack(frames)

    def write(self, states: np.ndarray, path: Union[str, os.PathLike]) -> str:
        """
        :param states: ``(H, state_dim)`` recorded states of one segment
        :param path: destination without the extension
        :return: the file written
        """
        return self.write_clips([states], [path])[0]

    def write_clips(self, states: Sequence[np.ndarray], paths: Sequence[Union[str, os.PathLike]]) -> list[str]:
        """
        Write clips that are shown together (a query's two segments) at one scale: with :attr:`crop`, one crop
        holding what any of them draws.

        :param states: one ``(H, state_dim)`` array of recorded states per clip
        :param paths: one destination per clip, without the extension
        :return: the files written
        """
        if len(states) != len(paths):
            raise ValueError(f"got {len(states)} state arrays for {len(paths)} paths")
        clips = [self.frames(segment) for segment in states]
        if self.crop:
            top, bottom, left, right = content_crop(clips)
            clips = [np.ascontiguousarray(frames[:, top:bottom, left:right]) for frames in clips]
        if self.trail:
            clips = [motion_trail(frames, self.trail) for frames in clips]
        return [write_video(frames, os.fspath(path), self.fps, self.video_format) for frames, path in zip(clips, paths)]

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env, self._codec = None, None
