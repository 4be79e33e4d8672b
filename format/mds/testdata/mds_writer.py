#!/usr/bin/env python3
"""An independent writer of Mosaic Streaming MDS datasets, for package mds's tests.

It mirrors streaming/base/format/mds/{writer,encodings}.py and
streaming/base/format/base/writer.py (numpy and the standard library only,
plus Debian's python3-zstd, the same zstd binding Streaming uses):

  shard   u32 samples, u32 offsets[samples + 1] (from the file's start),
          the config as JSON (sort_keys), then each sample: a u32 size per
          variable-size column, then every column's bytes, in column order
  columns sorted by name; fixed sizes from the encoding, else None
  index   index.json {"version": 2, "shards": [...]} (sort_keys), each shard
          {samples, raw_data, zip_data} + the config; shards flushed when
          the next sample would pass size_limit, named shard.NNNNN.mds[.EXT]

Usage:
    mds_writer.py make CASE DIR    write dataset CASE under DIR
    mds_writer.py check CASE TAR   check a tar of Brand's decoded samples

check derives every member's name and bytes from the documented mapping
(docs/format-mds.md), independently of the Go code.
"""

import bz2
import decimal
import gzip
import io
import json
import math
import os
import pickle
import struct
import sys
import tarfile
import zlib

import numpy as np

try:
    import zstd
except ImportError:  # only the compressed cases need it
    zstd = None

# NDArray's dtype codes.
VALUE_DTYPES = {'uint8': 8, 'int8': 9, 'uint16': 16, 'int16': 17, 'float16': 18, 'uint32': 32,
                'int32': 33, 'float32': 34, 'uint64': 64, 'int64': 65, 'float64': 66}
SCALARS = {'uint8': np.uint8, 'uint16': np.uint16, 'uint32': np.uint32, 'uint64': np.uint64,
           'int8': np.int8, 'int16': np.int16, 'int32': np.int32, 'int64': np.int64,
           'float16': np.float16, 'float32': np.float32, 'float64': np.float64}


def ndarray_parse(enc):
    args = enc.split(':')[1:]
    dtype = args[0] if args else None
    shape = tuple(int(d) for d in args[1].split(',')) if len(args) > 1 else None
    return dtype, shape


def encoded_size(enc):
    if enc == 'int' or enc in SCALARS:
        return np.dtype(np.int64 if enc == 'int' else SCALARS[enc]).itemsize
    if enc.startswith('ndarray'):
        dtype, shape = ndarray_parse(enc)
        if dtype is None or shape is None:
            return None
        return int(np.prod(shape)) * np.dtype(dtype).itemsize
    return None


def encode(enc, obj):
    if isinstance(obj, bytes):
        return obj
    if enc == 'str' or enc in ('str_int', 'str_float', 'str_decimal'):
        return str(obj).encode('utf-8')
    if enc == 'int':
        return np.int64(obj).tobytes()
    if enc in SCALARS:
        return SCALARS[enc](obj).tobytes()
    if enc == 'json':
        return json.dumps(obj).encode('utf-8')
    if enc == 'pkl':
        return pickle.dumps(obj)
    if enc.startswith('ndarray'):
        dtype, shape = ndarray_parse(enc)
        parts = []
        if dtype is None:
            parts.append(bytes([VALUE_DTYPES[obj.dtype.name]]))
        if shape is None:
            s = np.array(obj.shape, np.int64)
            x = s.max()
            st = 'uint8' if x < 1 << 8 else 'uint16' if x < 1 << 16 else 'uint32' if x < 1 << 32 else 'uint64'
            code = {'uint8': 0, 'uint16': 1, 'uint32': 2, 'uint64': 3}[st]
            parts.append(bytes([(len(obj.shape) << 2) | code]))
            parts.append(s.astype(st).tobytes())
        parts.append(obj.tobytes())
        return b''.join(parts)
    raise ValueError(enc)


def compress(algo, data):
    kind, _, level = algo.partition(':')
    if kind == 'zstd':
        return zstd.compress(data, int(level or 3))
    if kind == 'gz':
        return gzip.compress(data, int(level or 9))
    if kind == 'bz2':
        return bz2.compress(data, int(level or 9))
    raise ValueError(algo)


class Writer:
    """MDSWriter: JointWriter's shard flushing, MDSWriter's encoding."""

    def __init__(self, out, columns, compression=None, size_limit=1 << 26):
        self.out = out
        os.makedirs(out, exist_ok=True)
        self.compression = compression
        self.size_limit = size_limit
        self.column_names = sorted(columns)
        self.column_encodings = [columns[n] for n in self.column_names]
        self.column_sizes = [encoded_size(e) for e in self.column_encodings]
        self.config_data = json.dumps(self.get_config(), sort_keys=True).encode('utf-8')
        self.extra_bytes_per_shard = 4 + 4 + len(self.config_data)
        self.extra_bytes_per_sample = 4
        self.shards = []
        self.new_samples = []
        self.new_shard_size = self.extra_bytes_per_shard

    def get_config(self):
        return {'version': 2, 'format': 'mds', 'compression': self.compression, 'hashes': [],
                'size_limit': self.size_limit, 'column_names': self.column_names,
                'column_encodings': self.column_encodings, 'column_sizes': self.column_sizes}

    def encode_sample(self, sample):
        sizes, data = [], []
        for key, enc, size in zip(self.column_names, self.column_encodings, self.column_sizes):
            datum = encode(enc, sample[key])
            if size is None:
                sizes.append(len(datum))
            elif size != len(datum):
                raise KeyError('Unexpected data size')
            data.append(datum)
        return np.array(sizes, np.uint32).tobytes() + b''.join(data)

    def write(self, sample):
        new = self.encode_sample(sample)
        size = len(new) + self.extra_bytes_per_sample
        if self.size_limit and self.size_limit < self.new_shard_size + size:
            self.flush_shard()
        self.new_samples.append(new)
        self.new_shard_size += size

    def flush_shard(self):
        num = np.uint32(len(self.new_samples))
        sizes = list(map(len, self.new_samples))
        offsets = np.array([0] + sizes).cumsum().astype(np.uint32)
        offsets += len(num.tobytes()) + len(offsets.tobytes()) + len(self.config_data)
        raw = num.tobytes() + offsets.tobytes() + self.config_data + b''.join(self.new_samples)
        raw_name = 'shard.%05d.mds' % len(self.shards)
        raw_info = {'basename': raw_name, 'bytes': len(raw), 'hashes': {}}
        zip_info = None
        data, name = raw, raw_name
        if self.compression:
            data = compress(self.compression, raw)
            name = raw_name + '.' + self.compression.partition(':')[0]
            zip_info = {'basename': name, 'bytes': len(data), 'hashes': {}}
        with open(os.path.join(self.out, name), 'wb') as f:
            f.write(data)
        obj = {'samples': len(self.new_samples), 'raw_data': raw_info, 'zip_data': zip_info}
        obj.update(self.get_config())
        self.shards.append(obj)
        self.new_samples = []
        self.new_shard_size = self.extra_bytes_per_shard

    def finish(self):
        if self.new_samples:
            self.flush_shard()
        with open(os.path.join(self.out, 'index.json'), 'w') as f:
            json.dump({'version': 2, 'shards': self.shards}, f, sort_keys=True)


def merge_index(out, partitions):
    """streaming.base.util.merge_index: one root index naming the partitions' shards."""
    shards = []
    for p in partitions:
        with open(os.path.join(out, p, 'index.json')) as f:
            obj = json.load(f)
        for s in obj['shards']:
            for key in ('raw_data', 'zip_data'):
                if s.get(key):
                    s[key]['basename'] = os.path.join(p, s[key]['basename'])
        shards += obj['shards']
    with open(os.path.join(out, 'index.json'), 'w') as f:
        json.dump({'version': 2, 'shards': shards}, f)


def png(rng, w, h):
    """A real (grey) PNG, by the standard library."""
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    rows = b''.join(b'\x00' + rng.integers(0, 256, w, dtype=np.uint8).tobytes() for _ in range(h))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 0, 0, 0, 0)) +
            chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))


# The datasets: columns, how many samples, and how each is drawn.
ALL = {
    'b': 'bytes', 's': 'str', 'i': 'int', 'i8': 'int8', 'i16': 'int16', 'i32': 'int32', 'i64': 'int64',
    'u8': 'uint8', 'u16': 'uint16', 'u32': 'uint32', 'u64': 'uint64',
    'f16': 'float16', 'f32': 'float32', 'f64': 'float64', 'si': 'str_int', 'sf': 'str_float',
    'sd': 'str_decimal', 'jpg': 'jpeg', 'png': 'png', 'j': 'json',
    'a': 'ndarray', 'ad': 'ndarray:int16', 'af': 'ndarray:float32:2,3', 'ab': 'ndarray:uint8:300',
}
IMAGES = {'image': 'jpeg', 'label': 'int', 'caption': 'str', 'emb': 'ndarray:float32:8'}
CASES = {
    'all': dict(columns=ALL, samples=120, size_limit=1 << 14),
    'images': dict(columns=IMAGES, samples=50, size_limit=1 << 12),
    'zstd': dict(columns=ALL, samples=60, size_limit=1 << 14, compression='zstd:7'),
    'gz': dict(columns=IMAGES, samples=30, size_limit=1 << 12, compression='gz'),
    'bz2': dict(columns=IMAGES, samples=30, size_limit=1 << 12, compression='bz2:9'),
    'pkl': dict(columns={'obj': 'pkl', 'label': 'int'}, samples=10, size_limit=None),
    'merged': dict(columns=IMAGES, samples=40, size_limit=1 << 12, partitions=2, merge=True),
    'partitions': dict(columns=IMAGES, samples=40, size_limit=1 << 12, partitions=3),
}
EXTREMES = {'int8': [-128, 127], 'int16': [-32768, 32767], 'int32': [-2**31, 2**31 - 1],
            'int64': [-2**63, 2**63 - 1], 'int': [-2**63, 2**63 - 1], 'uint8': [0, 255],
            'uint16': [0, 65535], 'uint32': [0, 2**32 - 1], 'uint64': [0, 2**64 - 1],
            'float16': [float('nan'), float('inf'), -float('inf'), 6.1e-05, 65504.0, -0.0, 5.96e-08],
            'float32': [float('nan'), -float('inf'), 1.1754944e-38, -3.4028235e38, 1e-45],
            'float64': [-2.2250738585072014e-308, 1.7976931348623157e308, 5e-324, 0.1]}


def value(rng, enc, i):
    if enc == 'bytes':
        return rng.integers(0, 256, int(rng.integers(0, 700)), dtype=np.uint8).tobytes()
    if enc == 'str':
        return ''.join(chr(c) for c in rng.choice([0x61, 0x7a, 0xe9, 0x4e2d, 0x1f600, 0x20, 0x0a], int(rng.integers(0, 40))))
    if enc in EXTREMES or enc == 'int':
        ex = EXTREMES[enc]
        if i < len(ex):
            return ex[i]
        if enc.startswith('float'):
            return float(rng.standard_normal() * 10 ** int(rng.integers(-4, 4) if enc == 'float16' else rng.integers(-10, 10)))
        lo, hi = ex
        return int(rng.integers(lo, hi, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64))
    if enc == 'str_int':
        return int(rng.integers(-10**12, 10**12))
    if enc == 'str_float':
        return float(rng.standard_normal())
    if enc == 'str_decimal':
        return decimal.Decimal(int(rng.integers(-10**9, 10**9))) / 1000
    if enc == 'jpeg':
        return b'\xff\xd8\xff\xe0' + rng.integers(0, 256, int(rng.integers(10, 900)), dtype=np.uint8).tobytes() + b'\xff\xd9'
    if enc == 'png':
        return png(rng, int(rng.integers(1, 9)), int(rng.integers(1, 9)))
    if enc == 'json':
        return {'i': i, 'tags': ['a', 'b'][: i % 3], 'x': None if i % 2 else 1.5}
    if enc == 'pkl':
        return {'i': i, 'set': {i, i + 1}}
    if enc.startswith('ndarray'):
        dtype, shape = ndarray_parse(enc)
        if dtype is None:
            dtype = list(VALUE_DTYPES)[i % len(VALUE_DTYPES)]
        if shape is None:
            ndim = int(rng.integers(1, 4))
            shape = tuple(int(d) for d in rng.integers(1, 5, ndim))
            if i % 7 == 0:
                shape = (300,)  # a uint16 shape
            if i % 11 == 0:
                shape = (1,) * 20
        dt = np.dtype(dtype)
        if dt.kind == 'f':
            return rng.standard_normal(shape).astype(dt)
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dt)
    raise ValueError(enc)


def samples(case):
    c = CASES[case]
    rng = np.random.Generator(np.random.PCG64(len(case)))
    return [{k: value(rng, e, i) for k, e in sorted(c['columns'].items())} for i in range(c['samples'])]


def make(case, root):
    c = CASES[case]
    parts = c.get('partitions', 0)
    all_samples = samples(case)
    if not parts:
        w = Writer(root, c['columns'], c.get('compression'), c['size_limit'])
        for s in all_samples:
            w.write(s)
        w.finish()
        return
    names = ['part%d' % p for p in range(parts)]
    for p, name in enumerate(names):
        w = Writer(os.path.join(root, name), c['columns'], c.get('compression'), c['size_limit'])
        for s in all_samples[p::parts]:
            w.write(s)
        w.finish()
    if c.get('merge'):
        merge_index(root, names)


EXT = {'bytes': 'bin', 'str': 'txt', 'str_int': 'cls', 'str_float': 'txt', 'str_decimal': 'txt',
       'jpeg': 'jpg', 'png': 'png', 'json': 'json', 'pkl': 'pkl', 'int': 'cls'}


def exts(columns):
    ext = {}
    for n, e in columns.items():
        ext[n] = EXT.get(e) or ('cls' if e in EXTREMES and not e.startswith('float') else
                                'json' if e.startswith('float') else 'npy')
    count = {}
    for x in ext.values():
        count[x] = count.get(x, 0) + 1
    return {n: (n + '.' + x if count[x] > 1 else x) for n, x in ext.items()}


def expected(case):
    """Every member Brand must serve: name -> (encoding, value)."""
    c = CASES[case]
    ext = exts(c['columns'])
    all_samples = samples(case)
    parts = c.get('partitions', 0)
    out = {}

    def shard_keys(prefix, ss):
        # The writer's shard boundaries, computed again.
        w = Writer.__new__(Writer)
        Writer.__init__(w, '/tmp/mds-writer-dry-run', c['columns'], None, c['size_limit'])
        shard, n = 0, 0
        for s in ss:
            size = len(w.encode_sample(s)) + 4
            if w.size_limit and w.size_limit < w.new_shard_size + size:
                shard, n = shard + 1, 0
                w.new_shard_size = w.extra_bytes_per_shard
            w.new_shard_size += size
            yield '%sshard.%05d/%06d' % (prefix, shard, n), s
            n += 1

    groups = [('', all_samples)] if not parts else [('part%d/' % p, all_samples[p::parts]) for p in range(parts)]
    for prefix, ss in groups:
        for key, s in shard_keys(prefix, ss):
            for n, e in c['columns'].items():
                out[key + '.' + ext[n]] = (e, s[n])
    return out


def same(enc, got, want):
    if enc in ('bytes', 'jpeg', 'png') or isinstance(want, bytes):
        return got == want
    if enc == 'pkl':
        return got == pickle.dumps(want)  # compared as bytes, never unpickled from Brand
    if enc in ('str', 'str_int', 'str_float', 'str_decimal'):
        return got == str(want).encode('utf-8')
    if enc == 'json':
        return got == json.dumps(want).encode('utf-8')
    if enc in EXTREMES and not enc.startswith('float') or enc == 'int':
        return got == str(int(np.int64(want) if enc == 'int' else SCALARS[enc](want))).encode()
    if enc.startswith('float'):
        x = json.loads(got)  # Python's json reads NaN and Infinity
        w = SCALARS[enc](want)
        if math.isnan(w):
            return math.isnan(x)
        return SCALARS[enc](x) == w and math.copysign(1, x) == math.copysign(1, w)
    if enc.startswith('ndarray'):
        a = np.load(io.BytesIO(got), allow_pickle=False)
        return a.dtype == want.dtype and a.shape == want.shape and a.tobytes() == want.tobytes()
    raise ValueError(enc)


def check(case, tar_path):
    want = expected(case)
    seen = set()
    with tarfile.open(tar_path) as tf:
        for m in tf:
            if m.name not in want:
                sys.exit('unexpected member %s (want e.g. %s)' % (m.name, sorted(want)[:3]))
            if m.name in seen:
                sys.exit('member %s twice' % m.name)
            seen.add(m.name)
            enc, v = want[m.name]
            got = tf.extractfile(m).read()
            if not same(enc, got, v):
                sys.exit('%s (%s): got %r, want %r' % (m.name, enc, got[:80], v if not isinstance(v, bytes) else v[:80]))
    if seen != set(want):
        sys.exit('missing members: %s' % sorted(set(want) - seen)[:5])
    print('ok: %d members' % len(seen))


if __name__ == '__main__':
    cmd, case, path = sys.argv[1:4]
    {'make': make, 'check': check}[cmd](case, path)
