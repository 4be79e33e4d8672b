import io
import os
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brand import TarError, decode_tar, split_key  # noqa: E402


def make_tar(members, fmt=tarfile.USTAR_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


MEMBERS = [
    ("a/x.jpg", b"J" * 700),
    ("a/x.cls", b"3"),
    ("a/x.meta.json", b"{}"),
    ("b.v2/y.jpg", b""),
    ("b.v2/y", b"no ext"),
    ("z.png", os.urandom(1024)),
]
WANT = [
    {"__key__": "a/x", "jpg": b"J" * 700, "cls": b"3", "meta.json": b"{}"},
    {"__key__": "b.v2/y", "jpg": b"", "": b"no ext"},
    {"__key__": "z", "png": MEMBERS[-1][1]},
]


class TestTar(unittest.TestCase):
    def test_split_key(self):
        self.assertEqual(split_key("train/n01/x.JPEG"), ("train/n01/x", "JPEG"))
        self.assertEqual(split_key("a/b.c.d"), ("a/b", "c.d"))
        self.assertEqual(split_key("dir.v2/x.jpg"), ("dir.v2/x", "jpg"))
        self.assertEqual(split_key("a/b"), ("a/b", ""))

    def test_formats(self):
        for fmt in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
            with self.subTest(fmt=fmt):
                self.assertEqual(decode_tar(make_tar(MEMBERS, fmt)), WANT)

    def test_long_names_fall_back_to_tarfile(self):
        long = "d/" + "n" * 150 + "/" + "k" * 120
        members = [(long + ".jpg", b"1"), (long + ".cls", b"2"), ("short.jpg", b"3")]
        want = [{"__key__": long, "jpg": b"1", "cls": b"2"}, {"__key__": "short", "jpg": b"3"}]
        for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
            with self.subTest(fmt=fmt):
                self.assertEqual(decode_tar(make_tar(members, fmt)), want)

    def test_ustar_prefix(self):
        name = "p" * 120 + "/x.jpg"  # fits ustar's prefix field
        self.assertEqual(decode_tar(make_tar([(name, b"1")])), [{"__key__": "p" * 120 + "/x", "jpg": b"1"}])

    def test_empty_and_unterminated(self):
        self.assertEqual(decode_tar(bytes(1024)), [])
        self.assertEqual(decode_tar(b""), [])
        full = make_tar(MEMBERS)
        body = full[: full.rfind(b"no ext") + 512]  # ends after member 5's padding
        body = body[: (len(body) // 512) * 512]
        self.assertEqual(decode_tar(body)[:2], WANT[:2])

    def test_corrupt(self):
        full = make_tar(MEMBERS)
        with self.assertRaises(TarError):
            decode_tar(full[:600])  # truncated inside a member
        bad = bytearray(full)
        bad[0] ^= 1  # checksum mismatch: tarfile decides, and refuses
        with self.assertRaises(TarError):
            decode_tar(bytes(bad))


if __name__ == "__main__":
    unittest.main()
