"""Writes the .npy headers numpy writes, as JSON, for TestNumPy.

    python3 numpy_headers.py > numpy_headers.json

Each case is an array's descriptor, order and shape, the version numpy
wrote, and the header's bytes (hex): what numpy.save writes before the
data (numpy.lib.format.write_array), or for an array too large to make,
what it writes for its header alone (write_array_header_1_0/_2_0, the
same bytes). "brand" marks the shapes Brand itself writes (a Parquet or
MDS token list, a transformed image, a video clip), whose headers the Go
writer must write byte for byte.
"""

import io
import json
import sys

import numpy
import numpy.lib.format as fmt

SMALL = [
    # (dtype, shape, fortran, version, brand)
    ("|u1", (), False, (1, 0), False),
    ("|u1", (0,), False, (1, 0), True),
    ("<i4", (5,), False, (1, 0), True),
    ("<i4", (0,), False, (1, 0), True),
    ("<u2", (7,), False, (1, 0), True),
    ("<i8", (3,), False, (1, 0), True),
    ("<u4", (2048,), False, (1, 0), True),
    ("<f4", (2, 3, 4), False, (1, 0), True),
    ("<f8", (2, 3), True, (1, 0), False),
    ("|i1", (4,), False, (1, 0), True),
    ("<i2", (1, 1), False, (1, 0), True),
    (">i4", (3,), False, (1, 0), False),
    ("<f2", (2,), False, (1, 0), False),
    ("<c16", (2,), False, (1, 0), False),
    ("|b1", (3,), False, (1, 0), False),
    ("<U3", (2,), False, (1, 0), False),
    ("|S5", (2,), False, (1, 0), False),
    ("<M8[ns]", (2,), False, (1, 0), False),
    ("<m8[s]", (2,), False, (1, 0), False),
    ("|u1", (1, 1, 3), False, (1, 0), True),
    ("|u1", (3, 7, 1000), False, (1, 0), True),
    ("<i4", (5,), False, (2, 0), False),
    ("|u1", (2, 2), True, (2, 0), False),
    ("<f4", (3,), False, (3, 0), False),
]

LARGE = [
    ("|u1", (3, 224, 224), (1, 0), True),
    ("|u1", (224, 224, 3), (1, 0), True),
    ("|u1", (3, 16384, 16384), (1, 0), True),
    ("|u1", (16, 3, 224, 224), (1, 0), True),
    ("|u1", (3, 16, 224, 224), (1, 0), True),
    ("|u1", (16, 224, 224, 3), (1, 0), True),
    ("<i4", (1234567890123,), (1, 0), True),
    ("<i8", (9223372036854775807,), (1, 0), True),
    ("<u2", (100000, 100000, 100000), (1, 0), False),
    # numpy's room for the first axis to grow crosses 128 bytes here:
    # its header is 192 bytes, the Go writer's 128.
    ("<u2", (1, 1000000, 1000000, 1000000, 1000000, 100), (1, 0), False),
    ("<i4", (70000,), (2, 0), False),
]


def case(descr, shape, fortran, version, brand, header):
    return {
        "descr": descr,
        "shape": list(shape),
        "fortran": fortran,
        "version": "%d.%d" % version,
        "brand": brand,
        "header": header.hex(),
    }


def main():
    cases = []
    for descr, shape, fortran, version, brand in SMALL:
        a = numpy.zeros(shape, dtype=numpy.dtype(descr), order="F" if fortran else "C")
        b = io.BytesIO()
        fmt.write_array(b, a, version=version)
        v = b.getvalue()
        header = v[: len(v) - a.nbytes]
        b.seek(0)
        assert fmt.read_magic(b) == version
        cases.append(case(fmt.dtype_to_descr(a.dtype), shape, fortran, version, brand, header))
    for descr, shape, version, brand in LARGE:
        d = {"descr": descr, "fortran_order": False, "shape": shape}
        b = io.BytesIO()
        if version == (1, 0):
            fmt.write_array_header_1_0(b, d)
        else:
            fmt.write_array_header_2_0(b, d)
        cases.append(case(descr, shape, False, version, brand, b.getvalue()))
    # One case a line, so that a change reads as one.
    sys.stdout.write('{"numpy": %s, "cases": [\n' % json.dumps(numpy.__version__))
    sys.stdout.write(",\n".join(json.dumps(c) for c in cases))
    sys.stdout.write("\n]}\n")


if __name__ == "__main__":
    main()
