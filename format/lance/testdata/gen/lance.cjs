// lance.cjs writes format/lance's fixture datasets with Lance's own writer
// (@lancedb/lancedb, pinned by scripts/ensure-lancedb.sh) at its default
// options, then reads every version of each back with Lance's own reader
// and writes a canonical JSON of every value beside it: the reference the
// Go reader is held to.
//
//   node lance.cjs write OUTDIR   write the datasets and OUTDIR/NAME.json
//                                 (NAME.json.gz for the large ones)
//   node lance.cjs read DATASET   print DATASET's canonical JSON
//   node lance.cjs canonical DIR OUTDIR
//                                 write the canonical JSON of the fixtures
//                                 in DIR into OUTDIR (the tests' check that
//                                 the committed JSON is what Lance reads)
//   node lance.cjs large OUTDIR   write the large table (20 MB, 8 pages of
//                                 images) and its JSON, for a test only
//
// Canonical form, one object a row, in Lance's scan order (fragments in
// manifest order, rows in file order, deleted rows left out):
//   _rowaddr   the row address (fragment id << 32 | offset), decimal
//   integers   decimal strings (64-bit values do not fit a JSON number)
//   floats     "0x" and the IEEE bit pattern in hex (NaN and -0 exact)
//   strings    the JSON string
//   binary     {"len": n, "sha256": hex}
//   fixed-size binary  the bytes in hex
//   blobs      Lance's description {"position", "size"} and the bytes it
//              names as {"len", "sha256"}
//   bools      true/false
//   timestamps the stored integer, decimal
//   fixed-size lists  the items' forms without "0x", joined by commas
//   structs    an object of the children's forms
//   null       null
// Run with NODE_PATH pointing at the node_modules ensure-lancedb.sh made.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const zlib = require("zlib");
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

// mulberry32: a seeded generator, so that regenerating writes the same values.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomBytes(r, n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

// The basic table's rows [lo, hi): every kind the foundation reads.
function basicBatch(lo, hi, seed) {
  const r = rng(seed);
  const n = hi - lo;
  const id = [], small = [], f64 = [], f32 = [], name = [], thumb = [], flag = [];
  const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
  for (let i = lo; i < hi; i++) {
    id.push(BigInt(i));
    small.push(i % 7 === 3 ? null : Math.floor(r() * 2000000) - 1000000);
    f64.push(i % 11 === 5 ? null : (r() - 0.5) * 1e6);
    f32.push(i % 13 === 2 ? null : Math.fround(r() * 100));
    name.push(i % 9 === 4 ? null : words[i % words.length] + "-" + i + "-" + "x".repeat(i % 23));
    // Thumbnails of 2-6 KiB, random (incompressible), on a third of the rows.
    thumb.push(i % 3 !== 0 ? null : randomBytes(r, 2048 + Math.floor(r() * 4096)));
    flag.push(i % 17 === 0 ? null : r() < 0.5);
  }
  return new arrow.Table({
    id: arrow.vectorFromArray(id, new arrow.Int64()),
    small: arrow.vectorFromArray(small, new arrow.Int32()),
    f64: arrow.vectorFromArray(f64, new arrow.Float64()),
    f32: arrow.vectorFromArray(f32, new arrow.Float32()),
    name: arrow.vectorFromArray(name, new arrow.Utf8()),
    thumb: arrow.vectorFromArray(thumb, new arrow.Binary()),
    flag: arrow.vectorFromArray(flag, new arrow.Bool()),
  });
}

// The images table's rows: values of ~100 KiB, which Lance's default
// writer compresses per value with zstd. Most are made of a repeated
// random KiB (so that the fixtures stay small), one is random throughout.
function imagesBatch(lo, hi, seed) {
  const r = rng(seed);
  const id = [], image = [];
  for (let i = lo; i < hi; i++) {
    id.push(i);
    const size = 80 * 1024 + Math.floor(r() * 40 * 1024);
    if (i % 4 === 2) {
      image.push(null);
    } else if (i === 1) {
      image.push(randomBytes(r, size));
    } else {
      const unit = randomBytes(r, 1024);
      const b = Buffer.alloc(size);
      for (let o = 0; o < size; o += 1024) unit.copy(b, o);
      image.push(b);
    }
  }
  return new arrow.Table({
    id: arrow.vectorFromArray(id, new arrow.Int32()),
    image: arrow.vectorFromArray(image, new arrow.Binary()),
  });
}

// The kinds table's rows [lo, hi): what Lance's default writer compresses
// beyond flat and variable in pages of thousands of rows: sequential,
// random and run-length integers, low-cardinality and long text,
// timestamps, an 8-float embedding, an all-null column.
function kindsBatch(lo, hi, seed) {
  const r = rng(seed);
  const cols = { seq: [], rnd: [], runs: [], cat: [], text: [], ts: [], emb8: [], allnull: [], score: [] };
  const cats = ["cat", "dog", "bird", "fish", "horse"];
  const words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"];
  for (let i = lo; i < hi; i++) {
    cols.seq.push(BigInt(1000000 + i));
    cols.rnd.push(i % 50 === 7 ? null : Math.floor(r() * 4096));
    cols.runs.push(Math.floor(i / 200) * 3);
    cols.cat.push(i % 31 === 0 ? null : cats[Math.floor(r() * cats.length)]);
    let t = "";
    for (let w = 0; w < 4 + (i % 9); w++) t += words[Math.floor(r() * words.length)] + " ";
    cols.text.push(t + i);
    cols.ts.push(1700000000000000n + BigInt(i) * 1000003n);
    const e = [];
    for (let k = 0; k < 8; k++) e.push(Math.fround(Math.floor(r() * 64) / 16));
    cols.emb8.push(e);
    cols.allnull.push(null);
    cols.score.push(Math.floor(r() * 1000) / 8);
  }
  return new arrow.Table({
    seq: arrow.vectorFromArray(cols.seq, new arrow.Int64()),
    rnd: arrow.vectorFromArray(cols.rnd, new arrow.Int32()),
    runs: arrow.vectorFromArray(cols.runs, new arrow.Int32()),
    cat: arrow.vectorFromArray(cols.cat, new arrow.Utf8()),
    text: arrow.vectorFromArray(cols.text, new arrow.Utf8()),
    // The builder takes milliseconds as numbers; the microseconds are set exactly.
    ts: arrow.makeVector(arrow.makeData({ type: new arrow.TimestampMicrosecond(), length: cols.ts.length, data: BigInt64Array.from(cols.ts) })),
    emb8: arrow.vectorFromArray(cols.emb8, new arrow.FixedSizeList(8, new arrow.Field("item", new arrow.Float32(), true))),
    allnull: arrow.vectorFromArray(cols.allnull, new arrow.Int32()),
    score: arrow.vectorFromArray(cols.score, new arrow.Float64()),
  });
}

function canonicalValue(type, v) {
  if (v === null || v === undefined) return null;
  switch (type.typeId) {
    case arrow.Type.Int:
      return BigInt(v).toString();
    case arrow.Type.Float: {
      const b = Buffer.alloc(8);
      if (type.precision === arrow.Precision.SINGLE) {
        b.writeFloatBE(v, 0);
        return "0x" + b.subarray(0, 4).toString("hex");
      }
      b.writeDoubleBE(v, 0);
      return "0x" + b.toString("hex");
    }
    case arrow.Type.Utf8:
    case arrow.Type.LargeUtf8:
      return v;
    case arrow.Type.FixedSizeBinary:
      return Buffer.from(v).toString("hex");
    case arrow.Type.Binary:
    case arrow.Type.LargeBinary: {
      const b = Buffer.from(v);
      return { len: b.length, sha256: crypto.createHash("sha256").update(b).digest("hex") };
    }
    case arrow.Type.Bool:
      return v;
    case arrow.Type.Timestamp:
      return v.toString(); // the raw int64 (rawValue), not the builder's milliseconds
    case arrow.Type.FixedSizeList: {
      // The items' canonical forms, their "0x" dropped, joined by commas.
      const out = [];
      for (let k = 0; k < v.length; k++) out.push(String(canonicalValue(type.children[0].type, v.get(k))).replace(/^0x/, ""));
      return out.join(",");
    }
    case arrow.Type.Struct: {
      const out = {};
      for (const c of type.children) out[c.name] = canonicalValue(c.type, v[c.name]);
      return out;
    }
    default:
      throw new Error("no canonical form for " + type);
  }
}

// rawValue is row i of a column of 64-bit values as stored (a BigInt),
// null where it is null: arrow's get() of a timestamp is a lossy number
// of milliseconds.
function rawValue(col, i) {
  for (const d of col.data) {
    if (i < d.length) {
      if (d.nullCount > 0 && d.nullBitmap && !((d.nullBitmap[(d.offset + i) >> 3] >> ((d.offset + i) & 7)) & 1)) return null;
      return d.values[d.offset + i];
    }
    i -= d.length;
  }
  throw new Error("row past the column");
}

// Lance's reader gives a blob column (blob v1) as each row's description,
// {position, size} in the data file, not its bytes.
function isBlobDescription(type) {
  return type.typeId === arrow.Type.Struct && type.children.map((c) => c.name).join() === "position,size";
}

// blobValue is a blob row's canonical form: Lance's description, and the
// length and SHA-256 of the bytes it names in the dataset's one data file
// (null for a null row).
function blobValue(dir, d) {
  if (d === null || d === undefined) return null;
  const position = BigInt(d.position), size = BigInt(d.size);
  const files = fs.readdirSync(path.join(dir, "data"));
  if (files.length !== 1) throw new Error("a blob fixture of one data file only");
  const b = Buffer.alloc(Number(size));
  const fd = fs.openSync(path.join(dir, "data", files[0]), "r");
  fs.readSync(fd, b, 0, b.length, Number(position));
  fs.closeSync(fd);
  return { position: position.toString(), size: size.toString(), len: b.length, sha256: crypto.createHash("sha256").update(b).digest("hex") };
}

// canonical reads every version of the table at dir with Lance's reader.
async function canonical(dir, latestOnly) {
  const db = await lancedb.connect(path.dirname(dir));
  const tbl = await db.openTable(path.basename(dir).replace(/\.lance$/, ""));
  const versions = [];
  let vs = await tbl.listVersions();
  if (latestOnly) vs = vs.slice(-1);
  for (const v of vs) {
    await tbl.checkout(v.version);
    const t = await tbl.query().withRowId().toArrow();
    const rows = [];
    for (let i = 0; i < t.numRows; i++) {
      const row = {};
      for (const f of t.schema.fields) {
        const col = t.getChild(f.name);
        const name = f.name === "_rowid" ? "_rowaddr" : f.name;
        if (isBlobDescription(f.type)) row[name] = blobValue(dir, col.get(i));
        else row[name] = canonicalValue(f.type, f.type.typeId === arrow.Type.Timestamp ? rawValue(col, i) : col.get(i));
      }
      rows.push(row);
    }
    rows.sort((a, b) => (BigInt(a._rowaddr) < BigInt(b._rowaddr) ? -1 : 1));
    versions.push({ version: v.version, rows });
  }
  return { versions };
}

async function write(out) {
  fs.mkdirSync(out, { recursive: true });
  const db = await lancedb.connect(out);
  // basic: three fragments over three versions, a fourth version deleting
  // a few rows (an Arrow IPC deletion file), V2 manifest names (the default).
  {
    const t = await db.createTable("basic", basicBatch(0, 60, 1), { mode: "overwrite" });
    await t.add(basicBatch(60, 90, 2));
    await t.add(basicBatch(90, 130, 3));
    await t.delete("id % 10 = 7 AND id < 80");
  }
  // v1names: V1 manifest names, two versions.
  {
    const t = await db.createTable("v1names", basicBatch(0, 20, 4), {
      mode: "overwrite",
      storageOptions: { new_table_enable_v2_manifest_paths: "false" },
    });
    await t.add(basicBatch(20, 25, 5));
  }
  // images: values of ~100 KiB, two fragments.
  {
    const t = await db.createTable("images", imagesBatch(0, 5, 6), { mode: "overwrite" });
    await t.add(imagesBatch(5, 8, 7));
  }
  // kinds: 2,048 rows written as 8 batches of 256 in one call, then an
  // append of 300 rows; its canonical JSON is of the latest version only
  // (the first is its first fragment), gzipped.
  {
    const batches = [];
    for (let b = 0; b < 8; b++) batches.push(...kindsBatch(256 * b, 256 * (b + 1), 10 + b).batches);
    const t = await db.createTable("kinds", new arrow.Table(batches), { mode: "overwrite" });
    await t.add(kindsBatch(2048, 2348, 20));
  }
  // bigdel: 5,200 rows of which 5,096 are deleted, more than the 5,000
  // above which Lance writes a roaring bitmap rather than an Arrow file.
  {
    const id = Int32Array.from({ length: 5200 }, (_, i) => i);
    const t = await db.createTable("bigdel", new arrow.Table({ id: arrow.makeVector(id) }), { mode: "overwrite" });
    await t.delete("id % 50 != 0");
  }
  // emb768: 8 rows of a 768-float embedding (3 KiB a row).
  {
    const r = rng(30);
    const emb = [];
    for (let i = 0; i < 8; i++) emb.push(Array.from({ length: 768 }, () => Math.fround(r() * 2 - 1)));
    const t = await db.createTable("emb768", new arrow.Table({
      id: arrow.vectorFromArray(Array.from({ length: 8 }, (_, i) => i), new arrow.Int32()),
      emb: arrow.vectorFromArray(emb, new arrow.FixedSizeList(768, new arrow.Field("item", new arrow.Float32(), true))),
    }), { mode: "overwrite" });
  }
  // longtext: 48 rows of text of 600 to 2,000 bytes (full-zip, FSST per
  // value where Lance's writer finds it worth it), some null.
  {
    const r = rng(40);
    const words = ["training", "batch", "object", "storage", "shuffle", "epoch", "gradient", "tensor", "lance", "gateway"];
    const text = [];
    for (let i = 0; i < 48; i++) {
      if (i % 11 === 6) {
        text.push(null);
        continue;
      }
      let t = "";
      const n = 600 + Math.floor(r() * 1400);
      while (t.length < n) t += words[Math.floor(r() * words.length)] + (r() < 0.1 ? ". " : " ");
      text.push(t);
    }
    await db.createTable("longtext", new arrow.Table({
      id: arrow.vectorFromArray(Array.from({ length: 48 }, (_, i) => i), new arrow.Int32()),
      text: arrow.vectorFromArray(text, new arrow.Utf8()),
    }), { mode: "overwrite" });
  }
  // blob: blob v1, a LargeBinary field with lance-encoding:blob, which
  // the JS layer refuses (and drops field metadata): the table is made by
  // the native binding from an Arrow IPC file. Values of 2 to 7 KiB, an
  // empty one and a null.
  {
    const r = rng(50);
    const vals = [];
    for (let i = 0; i < 8; i++) vals.push(i === 2 ? null : i === 5 ? Buffer.alloc(0) : randomBytes(r, 2048 + Math.floor(r() * 5120)));
    const blob = new arrow.Field("blob", new arrow.LargeBinary(), true, new Map([["lance-encoding:blob", "true"]]));
    const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int32(), true), blob]);
    const t = new arrow.Table(schema, {
      id: arrow.vectorFromArray(Array.from({ length: 8 }, (_, i) => i), new arrow.Int32()),
      blob: arrow.vectorFromArray(vals, new arrow.LargeBinary()),
    });
    await db.inner.createTable("blob", Buffer.from(arrow.tableToIPC(t, "file")), "overwrite", [], {});
  }
  // packed: a struct of an int32, a double and an int8 with the field
  // metadata lance-encoding:packed, made through the native binding as
  // blob is (the JS layer drops field metadata): Lance packs each row's
  // children into one mini-block value of 13 bytes. Without nulls: a
  // null row or child makes it a variable packed struct, which Lance 8.0
  // writes only in file format 2.2.
  {
    const r = rng(70);
    const n = 300;
    const st = new arrow.Struct([
      new arrow.Field("x", new arrow.Int32(), true),
      new arrow.Field("y", new arrow.Float64(), true),
      new arrow.Field("z", new arrow.Int8(), true),
    ]);
    const p = new arrow.Field("p", st, true, new Map([["lance-encoding:packed", "true"]]));
    const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int32(), true), p]);
    const vals = Array.from({ length: n }, () => ({ x: Math.floor(r() * 2e9) - 1e9, y: r() * 1e6 - 5e5, z: Math.floor(r() * 256) - 128 }));
    const t = new arrow.Table(schema, {
      id: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => i), new arrow.Int32()),
      p: arrow.vectorFromArray(vals, st),
    });
    await db.inner.createTable("packed", Buffer.from(arrow.tableToIPC(t, "file")), "overwrite", [], {});
  }
  // fsb: fixed-size binary, 1,100 rows: 16-byte UUIDs with nulls (flat
  // 128-bit values), 16-byte values of 40 distinct (a dictionary of
  // 128-bit items) and 8-byte values (flat 64-bit).
  {
    const r = rng(80);
    const n = 1100;
    const low = Array.from({ length: 40 }, () => randomBytes(r, 16));
    await db.createTable("fsb", new arrow.Table({
      uuid: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => (i % 29 === 3 ? null : randomBytes(r, 16))), new arrow.FixedSizeBinary(16)),
      low: arrow.vectorFromArray(Array.from({ length: n }, () => low[Math.floor(r() * 40)]), new arrow.FixedSizeBinary(16)),
      fsb8: arrow.vectorFromArray(Array.from({ length: n }, () => randomBytes(r, 8)), new arrow.FixedSizeBinary(8)),
    }), { mode: "overwrite" });
  }
  await writeCanonical(out, out);
}

// The fixtures, and whether their canonical JSON is of the latest version
// only (gzipped) rather than of every version.
const fixtures = [["basic"], ["v1names"], ["images"], ["kinds", true], ["bigdel", true], ["emb768", true], ["longtext", true], ["blob", true], ["packed", true], ["fsb", true]];

// writeCanonical reads the fixtures in dir with Lance's reader and writes
// their canonical JSON into out.
async function writeCanonical(dir, out) {
  for (const [name, latestOnly] of fixtures) {
    const c = await canonical(path.join(dir, name + ".lance"), latestOnly);
    const text = JSON.stringify(c).replace(/\},\{/g, "},\n{") + "\n";
    if (latestOnly) fs.writeFileSync(path.join(out, name + ".json.gz"), zlib.gzipSync(text, { level: 9 }));
    else fs.writeFileSync(path.join(out, name + ".json"), text);
  }
  // The connection's namespace manifest is no part of any dataset.
  fs.rmSync(path.join(dir, "__manifest"), { recursive: true, force: true });
}

// large writes, at test time and never committed, a table of 200
// random images of 80 to 120 KiB written as 8 batches of 25 (an image
// page a batch, zstd per value), with an int column whose pages fall
// elsewhere, and its canonical JSON.
async function large(out) {
  fs.mkdirSync(out, { recursive: true });
  const db = await lancedb.connect(out);
  const r = rng(60);
  const batches = [];
  for (let b = 0; b < 8; b++) {
    const id = [], image = [];
    for (let i = 25 * b; i < 25 * (b + 1); i++) {
      id.push(i);
      image.push(i % 37 === 5 ? null : randomBytes(r, 80 * 1024 + Math.floor(r() * 40 * 1024)));
    }
    batches.push(...new arrow.Table({ id: arrow.vectorFromArray(id, new arrow.Int32()), image: arrow.vectorFromArray(image, new arrow.Binary()) }).batches);
  }
  await db.createTable("large", new arrow.Table(batches), { mode: "overwrite" });
  const c = await canonical(path.join(out, "large.lance"), true);
  fs.writeFileSync(path.join(out, "large.json"), JSON.stringify(c).replace(/\},\{/g, "},\n{") + "\n");
  fs.rmSync(path.join(out, "__manifest"), { recursive: true, force: true });
}

async function main() {
  const [cmd, arg] = process.argv.slice(2);
  if (cmd === "write" && arg) return write(arg);
  if (cmd === "read" && arg) return process.stdout.write(JSON.stringify(await canonical(arg)) + "\n");
  if (cmd === "canonical" && arg && process.argv[4]) return writeCanonical(arg, process.argv[4]);
  if (cmd === "large" && arg) return large(arg);
  console.error("usage: lance.cjs write OUTDIR | read DATASET | canonical DIR OUTDIR | large OUTDIR");
  process.exit(2);
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
