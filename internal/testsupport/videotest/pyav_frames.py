"""pyav_frames.py VIDEO OUTDIR [--sha256]: every frame of a video as PyAV
(Debian's python3-av) decodes the whole file, the reference clips are held
to.

Writes OUTDIR/frames.json ({"width", "height", "pts": [...]} in the order
the decode gives the frames) and OUTDIR/frames.raw (each frame as
frame.to_ndarray(format="rgb24"), height x width x 3 bytes, in that
order); with --sha256, OUTDIR/frames.sha256 instead: each frame's SHA-256
of those bytes, 32 bytes a frame (large videos' references)."""
import hashlib
import json
import os
import sys

import av


def main(video, out, digests):
    os.makedirs(out, exist_ok=True)
    pts = []
    w = h = 0
    name = "frames.sha256" if digests else "frames.raw"
    with av.open(video) as c, open(os.path.join(out, name), "wb") as raw:
        for f in c.decode(c.streams.video[0]):
            a = f.to_ndarray(format="rgb24")
            h, w = a.shape[0], a.shape[1]
            b = a.tobytes()
            raw.write(hashlib.sha256(b).digest() if digests else b)
            pts.append(f.pts)
    with open(os.path.join(out, "frames.json"), "w") as fp:
        json.dump({"width": w, "height": h, "pts": pts}, fp)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--sha256" in sys.argv[3:])
