"""Loads every .npy file in a directory with numpy.load, for TestNumPy.

    python3 numpy_load.py DIR

prints a JSON object: each file's name to its dtype (dtype.str), shape,
order and data (the array's bytes in C order, hex), as numpy reads them.
"""

import json
import os
import sys

import numpy


def main():
    out = {}
    d = sys.argv[1]
    for name in sorted(os.listdir(d)):
        a = numpy.load(os.path.join(d, name), allow_pickle=False)
        out[name] = {
            "descr": a.dtype.str,
            "shape": list(a.shape),
            "fortran": bool(a.flags.f_contiguous and not a.flags.c_contiguous),
            "data": numpy.ascontiguousarray(a).tobytes().hex(),
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
