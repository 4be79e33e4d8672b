"""pyav_dump.py VIDEO OUTDIR [--packets-only]: what package video's tests need of a video,
read with PyAV (Debian's python3-av), the reference the decoder is held to.

Writes into OUTDIR:
  stream.json  the video stream as a container index gives it: codec name,
               width, height, extradata (hex), time base, the display
               matrix's rotation (ffprobe's, counter-clockwise, in
               [0, 360)), and every packet
               in decode order (pts, dts, keyframe flag, offset and size in
               packets.bin); and the pts of every frame the whole-file
               decode gives, in the order it gives them;
  packets.bin  the packets' bytes, one after another;
  frames.raw   every frame of that decode as frame.to_ndarray(format="rgb24"),
               height x width x 3 bytes each, in the same order.

With --packets-only, frames.raw is not written (the benchmark's longer
video needs only its packets). The decode is PyAV's own (container.decode), from the start of the file:
the frames a whole-file decode gives, which package video must reproduce
byte for byte from any keyframe group.
"""
import json
import os
import subprocess
import sys

import av


def probe(video):
    """The codec's name (libavcodec's for the codec, as an index names it:
    "av1", where PyAV names the decoder, "libdav1d") and the display
    matrix's rotation, as ffprobe reads them (PyAV 10 does not expose a
    stream's side data)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams",
                          "-of", "json", video], check=True, capture_output=True).stdout
    s = json.loads(out)["streams"][0]
    rotation = 0
    for sd in s.get("side_data_list", []):
        if "rotation" in sd:
            rotation = int(sd["rotation"]) % 360
    return s["codec_name"], rotation


def main(video, out, packets_only=False):
    os.makedirs(out, exist_ok=True)
    packets = []
    with av.open(video) as c, open(os.path.join(out, "packets.bin"), "wb") as pb:
        s = c.streams.video[0]
        cc = s.codec_context
        offset = 0
        for p in c.demux(s):
            if p.size == 0:  # the demuxer's end-of-stream marker
                continue
            b = bytes(p)
            pb.write(b)
            packets.append({"pts": p.pts, "dts": p.dts, "key": bool(p.is_keyframe),
                            "offset": offset, "size": len(b)})
            offset += len(b)
        codec, rotation = probe(video)
        info = {
            "codec": codec,
            "width": cc.width,
            "height": cc.height,
            "pix_fmt": cc.pix_fmt,
            "extradata": (cc.extradata or b"").hex(),
            "time_base": [s.time_base.numerator, s.time_base.denominator],
            "rotation": rotation,
            "packets": packets,
        }
    frames = []
    if packets_only:
        info["frames"] = []
        with open(os.path.join(out, "stream.json"), "w") as f:
            json.dump(info, f, indent=1)
        open(os.path.join(out, "frames.raw"), "wb").close()
        return
    with av.open(video) as c, open(os.path.join(out, "frames.raw"), "wb") as fr:
        for f in c.decode(video=0):
            a = f.to_ndarray(format="rgb24")
            assert a.shape == (f.height, f.width, 3), a.shape
            fr.write(a.tobytes())
            frames.append({"pts": f.pts, "width": f.width, "height": f.height,
                           "format": f.format.name})
    info["frames"] = frames
    with open(os.path.join(out, "stream.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["--packets-only"])
