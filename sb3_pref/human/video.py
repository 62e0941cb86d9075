"""
From frames to the clip file a person watches: :func:`write_video` encodes frames (H.264, VP8 or GIF), and
:func:`motion_trail` and :func:`content_crop` make the clips of a classic-control env easier to judge.

Separate from :mod:`sb3_pref.human.rendering`, which deals with envs (reading and restoring their simulator
states, drawing frames from them): everything here works on plain ``(T, height, width, 3)`` uint8 arrays and
knows nothing of gymnasium, so it can be used (and tested) on any frames.
"""

from collections.abc import Sequence

import numpy as np

VIDEO_FORMATS = ("mp4", "webm", "gif")
#: At most 2x zoom when a classic-control clip is cropped to what it draws (see :func:`content_crop`).
MIN_CROP_SHARE = 0.5
#: Frames of motion trail a classic-control clip gets by default (see :func:`motion_trail`).
CLASSIC_TRAIL = 5


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
