"""Videos of a playing agent, written atomically: MP4 (H.264, yuv420p) or GIF.

MP4 is what every player opens; PyAV bundles FFmpeg, so nothing has to be
installed on the system. GIF is what a README shows inline (GitHub does not
play an MP4 from the repository in a page); Pillow picks one adaptive palette
per frame, which keeps an Atari game's few colours exact. Frames are RGB uint8
arrays; small frames are scaled up by an integer factor (nearest neighbour, so
pixels stay sharp) until they are at least ``min_height`` tall.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

import numpy as np

VIDEO_SUFFIXES = (".mp4", ".gif")


def open_video(path: Path, fps: float, max_frames: int = 0) -> VideoWriter | GifWriter:
    """The writer for ``path``'s suffix; ``max_frames`` > 0 caps the clip's length."""
    if path.suffix == ".gif":
        return GifWriter(path, fps, max_frames=max_frames)
    return VideoWriter(path, fps, max_frames=max_frames)


class _Writer:
    """Scaling, the frame cap and the atomic rename shared by the formats."""

    def __init__(self, path: Path, fps: float, min_height: int, max_frames: int) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
        self.fps = fps
        self.min_height = min_height
        self.max_frames = max_frames
        self.frames = 0
        self.scale = 0

    @property
    def full(self) -> bool:
        return 0 < self.max_frames <= self.frames

    def scaled(self, frame: np.ndarray) -> np.ndarray:
        if not self.scale:
            self.scale = max(1, -(-self.min_height // frame.shape[0]))
        return frame[..., :3].repeat(self.scale, axis=0).repeat(self.scale, axis=1)

    def add(self, frame: np.ndarray) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        self.tmp.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:  # interrupted: leave no half-written file
            self.discard()


class VideoWriter(_Writer):
    def __init__(self, path: Path, fps: float, min_height: int = 400, max_frames: int = 0) -> None:
        super().__init__(path, fps, min_height, max_frames)
        self.container = None
        self.stream = None

    def _open(self, frame: np.ndarray) -> None:
        import av

        height, width = frame.shape[:2]
        self.container = av.open(str(self.tmp), mode="w", format="mp4",
                                 options={"movflags": "+faststart"})  # playable while streaming
        self.stream = self.container.add_stream("libx264", rate=round(self.fps))
        # yuv420p (what browsers and phones decode) needs even sides.
        self.stream.width = (width + 1) // 2 * 2
        self.stream.height = (height + 1) // 2 * 2
        self.stream.pix_fmt = "yuv420p"
        self.stream.options = {"crf": "20"}

    def add(self, frame: np.ndarray) -> None:
        import av

        big = self.scaled(frame)
        if self.container is None:
            self._open(big)
        padded = np.zeros((self.stream.height, self.stream.width, 3), dtype=np.uint8)
        padded[: big.shape[0], : big.shape[1]] = big
        for packet in self.stream.encode(av.VideoFrame.from_ndarray(padded, format="rgb24")):
            self.container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        if self.container is None:
            return
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()
        os.replace(self.tmp, self.path)
        self.container = None

    def discard(self) -> None:
        if self.container is not None:
            self.container.close()
            self.container = None
        super().discard()


class GifWriter(_Writer):
    """Frames are kept until close (a clip of a few hundred frames is a few tens of MB)."""

    def __init__(self, path: Path, fps: float, min_height: int = 320, max_frames: int = 0) -> None:
        super().__init__(path, fps, min_height, max_frames)
        self.images: list = []

    @property
    def frame_ms(self) -> int:
        """GIF delays are whole centiseconds: 1/15 s is stored as 70 ms."""
        return 10 * max(2, round(100 / self.fps))

    def add(self, frame: np.ndarray) -> None:
        from PIL import Image

        self.images.append(Image.fromarray(np.ascontiguousarray(self.scaled(frame))))
        self.frames += 1

    def close(self) -> None:
        if not self.images:
            return
        first, *rest = self.images
        first.save(self.tmp, format="GIF", save_all=True, append_images=rest, duration=self.frame_ms,
                   loop=0, optimize=True)
        os.replace(self.tmp, self.path)
        self.images = []
