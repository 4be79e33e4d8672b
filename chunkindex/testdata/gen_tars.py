#!/usr/bin/env python3
"""Regenerates the tar fixtures in this directory and their expectations.

The .tar files are written by GNU tar (gnu and pax formats) and by Python's
tarfile, not by Go, and the .json expectations are computed here from
tarfile's own member offsets, so TestScanTarFixtures checks ScanTar against
an independent reader rather than against itself.

Run from chunkindex/testdata: python3 gen_tars.py  (needs GNU tar).
"""
import io, json, os, subprocess, tarfile, tempfile

LONG_DIR = "train/" + "d" * 60 + "/" + "e" * 60  # > 100 bytes with a file name
LONG_BASE = "train/" + "f" * 120                 # base name alone > 100 bytes

FILES = [  # (path, contents)
    ("train/a.cls", b"7\n"),
    ("train/a.jpg", b"JPG"),
    ("train/b.cls", b"3\n"),
    ("train/b.jpg", bytes(range(256)) * 3),       # 768 bytes: two blocks
    ("train/b.json", b'{"id": "b"}'),
    (LONG_DIR + "/c.cls", b"1\n"),
    (LONG_DIR + "/c.jpg", b"x" * 700),
    (LONG_BASE + ".jpg", b"long base"),
    ("train/empty.txt", b""),                       # zero-length member
    ("train/zz/d.v1.txt", b"dotted extension"),     # key train/zz/d, ext v1.txt
]
MTIME = 1700000000


def expect(path):
    """Samples as tarfile sees them: consecutive regular members per key."""
    out = []
    with tarfile.open(path) as tf:
        for m in tf:
            if not m.isreg():
                out.append(None)  # directories end a sample
                continue
            base = m.name.rsplit("/", 1)[-1]
            key = m.name[: len(m.name) - len(base)] + base.split(".", 1)[0]
            end = m.offset_data + (m.size + 511) // 512 * 512
            if out and out[-1] is not None and out[-1]["key"] == key:
                out[-1]["length"] = end - out[-1]["offset"]
                out[-1]["members"].append(m.name)
            else:
                out.append({"key": key, "offset": m.offset, "length": end - m.offset, "members": [m.name]})
    return [s for s in out if s is not None]


def write_expect(name):
    with open(name + ".json", "w") as f:
        json.dump(expect(name), f, indent=1)
        f.write("\n")


def gnu(name, fmt):
    with tempfile.TemporaryDirectory() as d:
        for p, data in FILES:
            os.makedirs(os.path.join(d, os.path.dirname(p)), exist_ok=True)
            with open(os.path.join(d, p), "wb") as f:
                f.write(data)
        pax = ["--pax-option=delete=atime,delete=ctime"] if fmt == "pax" else []
        subprocess.run(["tar", "--sort=name", "--format=" + fmt, "--owner=0", "--group=0",
                        "--numeric-owner", "--mtime=@%d" % MTIME, "--mode=u=rwX,go=rX"] + pax +
                       ["-C", d, "-cf", os.path.abspath(name), "train"], check=True)
    write_expect(name)


def python_pax(name):
    """PAX with a global header first, directories between samples, a
    non-ASCII name and names that need pax 'x' headers."""
    with tarfile.open(name, "w", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": "brand fixture"}) as tf:
        def add(p, data, kind=tarfile.REGTYPE):
            ti = tarfile.TarInfo(p)
            ti.type, ti.mtime, ti.mode = kind, MTIME, 0o755 if kind == tarfile.DIRTYPE else 0o644
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        add("val", b"", tarfile.DIRTYPE)
        add("val/q.jpg", b"q" * 1000)
        add("val/q.cls", b"5\n")
        add("val/sub", b"", tarfile.DIRTYPE)
        add("val/sub/caf\u00e9.jpg", b"non-ascii name")
        add("val/" + "g" * 200 + ".jpg", b"pax path")
        add("val/" + "g" * 200 + ".cls", b"9\n")
        add("val/r.txt", b"")
    write_expect(name)


def sparse(name, fmt, *opts):
    """A sample followed by a sparse file, which ScanTar must refuse."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "s"))
        with open(os.path.join(d, "s/a.txt"), "wb") as f:
            f.write(b"dense")
        with open(os.path.join(d, "s/hole.bin"), "wb") as f:
            f.write(b"head")
            f.seek(1 << 20)
            f.write(b"tail")
        subprocess.run(["tar", "--sort=name", "--format=" + fmt, "--sparse", "--owner=0", "--group=0",
                        "--numeric-owner", "--mtime=@%d" % MTIME, *opts,
                        "-C", d, "-cf", os.path.abspath(name), "s"], check=True)


if __name__ == "__main__":
    gnu("gnu.tar", "gnu")
    gnu("gnu-pax.tar", "pax")
    python_pax("python-pax.tar")
    sparse("sparse-gnu.tar", "gnu")
    sparse("sparse-pax.tar", "pax", "--sparse-version=1.0", "--pax-option=delete=atime,delete=ctime")
