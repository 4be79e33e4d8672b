// inplace_duckdb.cjs writes Parquet with DuckDB — a writer independent
// of arrow-go, which Brand reads with — for the integration tests of
// datasets served in place (integration/inplace_test.go). Usage:
//
//	NODE_PATH=$(scripts/ensure-duckdb.sh --print-path)/node_modules \
//	  node inplace_duckdb.cjs images MANIFEST.csv PHOTOS OUTDIR PARTS ROWGROUP
//	NODE_PATH=... node inplace_duckdb.cjs mixed OUTDIR ROWS ROWGROUP
//	NODE_PATH=... node inplace_duckdb.cjs hub OUTFILE CODEC ROWS
//	NODE_PATH=... node inplace_duckdb.cjs vision MANIFEST.jsonl OUTDIR PARTS
//
// images: the Hugging Face Hub's image layout — image struct{bytes, path}
// and an int64 label — from the JPEG files in PHOTOS that a CSV manifest
// names (file: the path as PHOTOS/*.jpg lists it; path, label, part, row),
// into OUTDIR/data/train-0000K-of-0000N.parquet, a file per part, rows in
// the manifest's order.
//
// mixed: a column of every kind (nullable integers and strings, a
// low-cardinality string, a list of integers, a float, a struct holding a
// list) in every codec DuckDB writes that the issue names (its lz4 is
// LZ4_RAW), data pages v1 and v2, dictionary (DuckDB's default) and plain
// (DICTIONARY_SIZE_LIMIT 0), one file each, into OUTDIR/mixed-*.parquet:
// file k holds rows k*ROWS .. (k+1)*ROWS-1 of the formulas below, which
// the Go test computes again.
//
// vision: image-text samples, from MANIFEST.jsonl (a line a sample:
// part, row, file — an image's path under OUTDIR/images, or null —,
// caption or null, conversations — a list of {from, value} — or null)
// into OUTDIR/d/part-K.parquet, a file per part, rows in row order:
// image BLOB, caption VARCHAR, conversations
// STRUCT("from" VARCHAR, "value" VARCHAR)[], zstd. A line may be up to
// 256 MiB (a conversation of a 100 MB turn).
//
// hub: the file of a damaged chunk — the Hub's layout, ROWS rows
// in one row group, each image a JPEG's first bytes and 1,920 bytes of
// hex digits (as format/parquet/testdata/duckdb.cjs writes it), its pages
// in CODEC — into OUTFILE.
const { DuckDBInstance } = require('@duckdb/node-api');

const [cmd, ...args] = process.argv.slice(2);

const mixed = (lo, hi) => `
SELECT
	CASE WHEN i % 11 = 3 THEN NULL ELSE (i % 7 - 3)::INTEGER END AS label,
	CASE WHEN i % 9 = 2 THEN NULL ELSE repeat('ab', (i % 5)::INTEGER) || i::VARCHAR END AS text,
	CASE WHEN i % 4 = 1 THEN NULL ELSE (i % 3)::VARCHAR END AS kind,
	CASE i % 6 WHEN 1 THEN NULL WHEN 2 THEN []::INTEGER[]
		ELSE list_transform(range((i % 40 + 1)::BIGINT), j -> ((i * 31 + j * 7) % 50000 - 100)::INTEGER) END AS input_ids,
	CASE WHEN i % 8 = 0 THEN NULL ELSE i / 4 END AS score,
	CASE WHEN i % 10 = 7 THEN NULL ELSE {'id': i * 8589934592,
		'tags': CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN []::VARCHAR[] ELSE ['a', NULL, i::VARCHAR] END} END AS meta
FROM range(${lo}, ${hi}) t(i) ORDER BY i`;

// The files of "mixed", in the order the Go test numbers them.
const codecs = ['uncompressed', 'snappy', 'gzip', 'zstd', 'lz4'];
const pages = ['V1', 'V2'];
const encodings = [['dictionary', ''], ['plain', ', DICTIONARY_SIZE_LIMIT 0']];

async function main() {
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	await con.run('SET threads = 1');
	const q = (s) => s.replaceAll("'", "''");
	switch (cmd) {
	case 'images': {
		const [manifest, photos, out, parts, rowGroup] = args;
		for (let k = 0; k < Number(parts); k++) {
			const name = `${out}/data/train-${String(k).padStart(5, '0')}-of-${String(parts).padStart(5, '0')}.parquet`;
			await con.run(`COPY (
				SELECT {'bytes': b.content, 'path': m.path} AS image, m.label::BIGINT AS label
				FROM read_csv('${q(manifest)}', header = true, all_varchar = true) m
				JOIN read_blob('${q(photos)}/*.jpg') b ON b.filename = m.file
				WHERE m.part::INTEGER = ${k} ORDER BY m.row::INTEGER
			) TO '${q(name)}' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE ${Number(rowGroup)})`);
		}
		break;
	}
	case 'mixed': {
		const [out, rows, rowGroup] = args;
		let k = 0;
		for (const codec of codecs) {
			for (const v of pages) {
				for (const [enc, opt] of encodings) {
					const lo = k * Number(rows);
					await con.run(`COPY (${mixed(lo, lo + Number(rows))}) TO '${q(out)}/mixed-${String(k).padStart(2, '0')}-${codec}-${v}-${enc}.parquet'
						(FORMAT parquet, COMPRESSION ${codec}, ROW_GROUP_SIZE ${Number(rowGroup)}, PARQUET_VERSION ${v}${opt})`);
					k++;
				}
			}
		}
		break;
	}
	case 'hub': {
		const [out, codec, rows] = args;
		await con.run(`COPY (
			SELECT
				{'bytes': unhex('FFD8FFE0') || (SELECT string_agg(md5(i::VARCHAR || '-' || j::VARCHAR), '' ORDER BY j) FROM range(60) t2(j))::BLOB,
				 'path': 'img_' || i || '.jpg'} AS image,
				(i % 10)::BIGINT AS label
			FROM range(${Number(rows)}) t(i) ORDER BY i
		) TO '${q(out)}' (FORMAT parquet, COMPRESSION ${codec})`);
		break;
	}
	case 'vision': {
		const [manifest, out, parts] = args;
		for (let k = 0; k < Number(parts); k++) {
			await con.run(`COPY (
				SELECT b.content AS image, m.caption AS caption, m.conversations AS conversations
				FROM read_json('${q(manifest)}', format = 'newline_delimited', maximum_object_size = 268435456, columns = {
					part: 'INTEGER', "row": 'INTEGER', file: 'VARCHAR', caption: 'VARCHAR',
					conversations: 'STRUCT("from" VARCHAR, "value" VARCHAR)[]'}) m
				LEFT JOIN read_blob('${q(out)}/images/*') b ON b.filename = m.file
				WHERE m.part = ${k} ORDER BY m."row"
			) TO '${q(out)}/d/part-${k}.parquet' (FORMAT parquet, COMPRESSION zstd)`);
		}
		break;
	}
	default:
		console.error('usage: node inplace_duckdb.cjs images MANIFEST PHOTOS OUTDIR PARTS ROWGROUP | mixed OUTDIR ROWS ROWGROUP | hub OUTFILE CODEC ROWS | vision MANIFEST OUTDIR PARTS');
		process.exit(2);
	}
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
