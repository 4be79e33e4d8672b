"""brand._npy, the package's one .npy header reader, held to numpy: the
headers numpy wrote (internal/codec/npy's golden set, which holds the Go
codec too) read as numpy meant them, and, where numpy is installed, every
header it writes now reads as numpy.lib.format reads it."""

import io
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from brand._npy import header_end, read_header  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "internal", "codec", "npy", "testdata", "numpy_headers.json")


def v1(text):
    b = text.encode("latin-1")
    return b"\x93NUMPY\x01\x00" + len(b).to_bytes(2, "little") + b


class TestNPY(unittest.TestCase):
    def test_golden(self):
        with open(GOLDEN) as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 30)
        for c in cases:
            b = bytes.fromhex(c["header"])
            h = read_header(b + b"data")
            self.assertEqual((h.offset, h.descr, h.fortran, list(h.shape)),
                             (len(b), c["descr"], c["fortran"], c["shape"]), c)
            self.assertEqual(header_end(b), len(b))

    def test_what_numpy_reads(self):
        h = read_header(v1("{'shape': (2, 3), 'fortran_order': True, 'descr': '<f4'}  \n"))
        self.assertEqual((h.descr, h.fortran, h.shape), ("<f4", True, (2, 3)))
        h = read_header(v1('{"descr": "<i8", "fortran_order": False, "shape": (3L, 4L), }\n'))
        self.assertEqual((h.descr, h.shape), ("<i8", (3, 4)))

    def test_refused(self):
        for bad in [
            b"",
            b"\x93NUMPX\x01\x00\x10\x00",
            b"\x93NUMPY\x04\x00\x00\x00",
            v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }")[:30],
            v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5), }"),
            v1("{'descr': '<i4', 'fortran_order': False}"),
            v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), 'extra': 1}"),
            v1("{'descr': '<i4', 'fortran_order': 0, 'shape': (5,)}"),
            v1("{'descr': '<i4', 'fortran_order': False, 'shape': (-5,)}"),
            v1("{'descr': '<i4', 'fortran_order': False, 'shape': (True,)}"),
            b"\x93NUMPY\x02\x00" + (20000).to_bytes(4, "little") + b" " * 20000,
        ]:
            with self.assertRaises(ValueError, msg=bad[:80]):
                read_header(bad)

    def test_numpy(self):
        try:
            import numpy
            import numpy.lib.format as fmt
        except ImportError:
            if os.environ.get("CI") == "true":
                raise
            self.skipTest("numpy not installed (scripts/ensure-numpy.sh installs it)")
        arrays = [numpy.zeros(s, dtype=d, order=o) for d in ("|u1", "<i4", ">f8", "<U3", "<M8[ns]", "<c8")
                  for s in ((), (0,), (5,), (2, 3), (3, 7, 10)) for o in ("C", "F")]
        for a in arrays:
            for version in ((1, 0), (2, 0), (3, 0)):
                b = io.BytesIO()
                fmt.write_array(b, a, version=version)
                raw = b.getvalue()
                b.seek(0)
                fmt.read_magic(b)
                read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, fortran, dtype = read(b)
                h = read_header(raw)
                self.assertEqual((h.offset, fmt.descr_to_dtype(h.descr), h.fortran, h.shape),
                                 (b.tell(), dtype, fortran, shape), (a.dtype, a.shape, version))


if __name__ == "__main__":
    unittest.main()
