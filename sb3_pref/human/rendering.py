"""
Turning recorded segments back into clips a person can watch.

Training envs never render: :class:`RenderStateWrapper` only records the simulator state before
every step (``info["render_state"]``, a flat float64 vector). When a segment is queried, a
:class:`SegmentRenderer` restores each recorded state in a separate render env, renders it, and
encodes the frames as a short looping video. So rendering costs nothing during rollouts and only
the few queried segments are ever drawn.

The frames-to-file side (encoding, motion trail, crop) is in :mod:`sb3_pref.human.video`; its names
that this module uses stay importable from here.
"""

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional, SupportsFloat, Union

import gymnasium as gym
import numpy as np

from sb3_pref.envs.optional import select_headless_gl_backend
from sb3_pref.human.video import CLASSIC_TRAIL, VIDEO_FORMATS, content_crop, default_video_format, motion_trail, write_video

RENDER_STATE_KEY = "render_state"


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
