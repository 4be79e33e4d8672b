import io
import os
import random
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brand import TarError, decode_tar, split_key  # noqa: E402
from brand._tar import _decode_tarfile  # noqa: E402


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

    def test_split_repeats(self):
        """Two adjacent samples of one key: one sample grouped by key; two
        with split_repeats, on the fast path and through tarfile."""
        members = [("k.npy", b"1"), ("k.cls", b"a"), ("k.npy", b"2"), ("k.cls", b"b"), ("m.npy", b"3")]
        split = [{"__key__": "k", "npy": b"1", "cls": b"a"}, {"__key__": "k", "npy": b"2", "cls": b"b"},
                 {"__key__": "m", "npy": b"3"}]
        self.assertEqual(decode_tar(make_tar(members)), [{"__key__": "k", "npy": b"2", "cls": b"b"}, split[2]])
        self.assertEqual(decode_tar(make_tar(members), split_repeats=True), split)
        self.assertEqual(_decode_tarfile(make_tar(members), split_repeats=True), split)

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


def outcome(decode, buf):
    try:
        return ("ok", decode(buf))
    except TarError:
        return ("TarError",)


def random_archive(rng):
    """A random archive of plain members (and now and then one the fast path
    leaves to tarfile), and the offsets of its headers."""
    fmt = rng.choice((tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT))
    parts = ["a", "b.c", "n01", "x_y", "é", "日本", "d.v2", "k" * rng.randint(1, 60)]
    members = []
    for _ in range(rng.randint(0, 12)):
        stem = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 3)))
        for ext in rng.sample(["jpg", "cls", "meta.json", "", "png"], rng.randint(1, 3)):
            name = f"{stem}.{ext}" if ext else stem
            size = rng.choice((0, 1, 511, 512, 513, 1024, rng.randint(0, 3000)))
            members.append((name, rng.randbytes(size)))
    buf = make_tar(members, fmt)
    with tarfile.open(fileobj=io.BytesIO(buf)) as tf:
        headers = [ti.offset for ti in tf]
    return buf, headers


class TestFastPathAgreesWithTarfile(unittest.TestCase):
    """The in-place decoder (plain ustar and GNU headers, checksum taken with
    zlib.adler32) decodes every archive as tarfile does, or leaves it to
    tarfile: on random archives, intact, with a corrupted header (whose
    checksum then fails) and cut at a block boundary."""

    def test_random_archives(self):
        rng = random.Random(7)
        for i in range(400):
            buf, headers = random_archive(rng)
            cases = [("intact", buf)]
            if headers:
                bad = bytearray(buf)
                h = rng.choice(headers)
                bad[h + rng.randrange(512)] ^= 1 << rng.randrange(8)
                cases.append(("corrupt header", bytes(bad)))
                bad = bytearray(buf)
                h = rng.choice(headers)
                field = bad[h + 148 : h + 156]
                digit = rng.randrange(6)  # one digit of the checksum's six
                bad[h + 148 + digit] = ord("0") + (field[digit] - ord("0") + rng.randint(1, 7)) % 8
                cases.append(("corrupt checksum", bytes(bad)))
                # From the first block on: an empty body is an empty batch
                # to decode_tar, an empty file to tarfile.
                cut = rng.randrange(1, len(buf) // 512) * 512
                cases.append((f"cut at {cut}", buf[:cut]))
            for what, b in cases:
                with self.subTest(archive=i, case=what):
                    self.assertEqual(outcome(decode_tar, b), outcome(_decode_tarfile, b))

    def test_checksum_is_exact(self):
        # A header whose byte sum exceeds 65521 (a name, prefix, user and
        # group of bytes 0xff): the checksum taken from adler32 is the exact
        # sum, not the sum modulo 65521, so a checksum off by 65521 is
        # refused as tarfile refuses it.
        key = "\udcff" * 150 + "/" + "\udcff" * 90  # bytes 0xff, by surrogateescape
        ti = tarfile.TarInfo(key + ".bin")
        ti.size, ti.uname, ti.gname = 1, "\udcff" * 31, "\udcff" * 31
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            tf.addfile(ti, io.BytesIO(b"x"))
        buf = bytearray(out.getvalue())
        self.assertEqual(decode_tar(bytes(buf)), [{"__key__": key, "bin": b"x"}])
        chk = int(bytes(buf[148:154]), 8)
        self.assertGreater(chk, 65521)
        buf[148:155] = b"%06o\x00" % (chk - 65521)
        self.assertEqual(outcome(decode_tar, bytes(buf)), ("TarError",))
        self.assertEqual(outcome(_decode_tarfile, bytes(buf)), ("TarError",))


class TestNpyViews(unittest.TestCase):
    """With npy_views, .npy members are memoryviews of the buffer (both
    decoders); every other member is bytes, as without."""

    MEMBERS = [("a/x.npy", b"N" * 300), ("a/x.cls", b"3"), ("b/y.left.npy", b"L" * 20), ("b/y.jpg", b"J")]

    def check(self, buf, samples):
        self.assertEqual([{k: bytes(v) if isinstance(v, memoryview) else v for k, v in s.items()} for s in samples],
                         [{"__key__": "a/x", "npy": b"N" * 300, "cls": b"3"},
                          {"__key__": "b/y", "left.npy": b"L" * 20, "jpg": b"J"}])
        for s in samples:
            for k, v in s.items():
                if k.endswith("npy"):
                    self.assertIsInstance(v, memoryview)
                    self.assertTrue(v.obj is buf)
                elif k != "__key__":
                    self.assertIsInstance(v, bytes)

    def test_fast_path_and_tarfile(self):
        for fmt in (tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT):
            with self.subTest(fmt=fmt):
                buf = bytearray(make_tar(self.MEMBERS, fmt))
                self.check(buf, decode_tar(buf, npy_views=True))
                self.check(buf, _decode_tarfile(buf, npy_views=True))
        for fmt in (tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT):
            with self.subTest(fmt=fmt, views="all"):
                buf = bytearray(make_tar(self.MEMBERS, fmt))
                for got in (decode_tar(buf, views=True), _decode_tarfile(buf, views=True)):
                    self.assertEqual([{k: bytes(v) if k != "__key__" else v for k, v in s.items()} for s in got],
                                     decode_tar(bytes(buf)))
                    for s in got:
                        for k, v in s.items():
                            if k != "__key__":
                                self.assertIsInstance(v, memoryview)  # every member: no copy
                                self.assertTrue(v.obj is buf)
        raw = make_tar(self.MEMBERS)
        self.assertEqual(decode_tar(bytearray(raw)), decode_tar(raw))  # without views: bytes, from any buffer
        self.assertTrue(all(type(v) is bytes for s in decode_tar(bytearray(raw)) for k, v in s.items() if k != "__key__"))


if __name__ == "__main__":
    unittest.main()
