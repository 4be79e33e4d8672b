"""pyav_frames.py VIDEO OUTDIR: every frame of a video as PyAV (Debian's
python3-av) decodes the whole file, the reference clips are held to.

Writes OUTDIR/frames.json ({"width", "height", "pts": [...]} in the order
the decode gives the frames) and OUTDIR/frames.raw (each frame as
frame.to_ndarray(format="rgb24"), height x width x 3 bytes, in that
order)."""
import json
import os
import sys

import av


def main(video, out):
    os.makedirs(out, exist_ok=True)
    pts = []
    w = h = 0
    with av.open(video) as c, open(os.path.join(out, "frames.raw"), "wb") as raw:
        for f in c.decode(c.streams.video[0]):
            a = f.to_ndarray(format="rgb24")
            h, w = a.shape[0], a.shape[1]
            raw.write(a.tobytes())
            pts.append(f.pts)
    with open(os.path.join(out, "frames.json"), "w") as fp:
        json.dump({"width": w, "height": h, "pts": pts}, fp)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
