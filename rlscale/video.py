"""MP4 files that every player opens: H.264, yuv420p, written atomically.

PyAV bundles FFmpeg, so nothing has to be installed on the system. Frames are
RGB uint8 arrays; small frames are scaled up by an integer factor (nearest
neighbour, so pixels stay sharp) until they are at least ``min_height`` tall.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

import numpy as np


class VideoWriter:
    def __init__(self, path: Path, fps: float, min_height: int = 400) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp.mp4")
        self.fps = fps
        self.min_height = min_height
        self.frames = 0
        self.scale = 0
        self.container = None
        self.stream = None

    def _open(self, frame: np.ndarray) -> None:
        import av

        height, width = frame.shape[:2]
        self.scale = max(1, -(-self.min_height // height))
        self.container = av.open(str(self.tmp), mode="w", format="mp4",
                                 options={"movflags": "+faststart"})  # playable while streaming
        self.stream = self.container.add_stream("libx264", rate=round(self.fps))
        # yuv420p (what browsers and phones decode) needs even sides.
        self.stream.width = (width * self.scale + 1) // 2 * 2
        self.stream.height = (height * self.scale + 1) // 2 * 2
        self.stream.pix_fmt = "yuv420p"
        self.stream.options = {"crf": "20"}

    def add(self, frame: np.ndarray) -> None:
        import av

        if self.container is None:
            self._open(frame)
        big = frame.repeat(self.scale, axis=0).repeat(self.scale, axis=1)
        padded = np.zeros((self.stream.height, self.stream.width, 3), dtype=np.uint8)
        padded[: big.shape[0], : big.shape[1]] = big[..., :3]
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

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        elif self.container is not None:  # interrupted: leave no half-written file
            self.container.close()
            self.tmp.unlink(missing_ok=True)
