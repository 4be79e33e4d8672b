// lance.cjs writes format/lance's fixture datasets with Lance's own writer
// (@lancedb/lancedb, pinned by scripts/ensure-lancedb.sh) at its default
// options, then reads every version of each back with Lance's own reader
// and writes a canonical JSON of every value beside it: the reference the
// Go reader is held to.
//
//   node lance.cjs write OUTDIR   write the datasets and OUTDIR/NAME.json
//   node lance.cjs read DATASET   print DATASET's canonical JSON
//
// Canonical form, one object a row, in Lance's scan order (fragments in
// manifest order, rows in file order, deleted rows left out):
//   _rowaddr   the row address (fragment id << 32 | offset), decimal
//   integers   decimal strings (64-bit values do not fit a JSON number)
//   floats     "0x" and the IEEE bit pattern in hex (NaN and -0 exact)
//   strings    the JSON string
//   binary     {"len": n, "sha256": hex}
//   bools      true/false
//   null       null
// Run with NODE_PATH pointing at the node_modules ensure-lancedb.sh made.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
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
    case arrow.Type.Binary:
    case arrow.Type.LargeBinary: {
      const b = Buffer.from(v);
      return { len: b.length, sha256: crypto.createHash("sha256").update(b).digest("hex") };
    }
    case arrow.Type.Bool:
      return v;
    default:
      throw new Error("no canonical form for " + type);
  }
}

// canonical reads every version of the table at dir with Lance's reader.
async function canonical(dir) {
  const db = await lancedb.connect(path.dirname(dir));
  const tbl = await db.openTable(path.basename(dir).replace(/\.lance$/, ""));
  const versions = [];
  for (const v of await tbl.listVersions()) {
    await tbl.checkout(v.version);
    const t = await tbl.query().withRowId().toArrow();
    const rows = [];
    for (let i = 0; i < t.numRows; i++) {
      const row = {};
      for (const f of t.schema.fields) {
        const col = t.getChild(f.name);
        const name = f.name === "_rowid" ? "_rowaddr" : f.name;
        row[name] = canonicalValue(f.type, col.get(i));
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
  for (const name of ["basic", "v1names", "images"]) {
    const c = await canonical(path.join(out, name + ".lance"));
    fs.writeFileSync(path.join(out, name + ".json"), JSON.stringify(c).replace(/\},\{/g, "},\n{") + "\n");
  }
  // The connection's namespace manifest is no part of any dataset.
  fs.rmSync(path.join(out, "__manifest"), { recursive: true, force: true });
}

async function main() {
  const [cmd, arg] = process.argv.slice(2);
  if (cmd === "write" && arg) return write(arg);
  if (cmd === "read" && arg) return process.stdout.write(JSON.stringify(await canonical(arg)) + "\n");
  console.error("usage: lance.cjs write OUTDIR | read DATASET");
  process.exit(2);
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
