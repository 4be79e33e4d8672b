// vision_duckdb.cjs writes image-text samples as Parquet with DuckDB — a
// writer independent of arrow-go and of Brand's reader — for the
// gateway's vision tests over Parquet served in place
// (gateway/visionparquet_test.go). Usage:
//
//	NODE_PATH=$(scripts/ensure-duckdb.sh --print-path)/node_modules \
//	  node vision_duckdb.cjs MANIFEST.jsonl OUTDIR PARTS
//
// MANIFEST.jsonl holds a line a sample: {part, row, file, caption,
// conversations}: file the image's path (null for none), caption a
// string or null, conversations a list of {from, value} or null. Part k's
// rows, in row order, go to OUTDIR/d/part-K.parquet: image BLOB (the
// file's bytes), caption VARCHAR, conversations
// STRUCT("from" VARCHAR, "value" VARCHAR)[], snappy, one row group.
const { DuckDBInstance } = require('@duckdb/node-api');

async function main() {
	const [manifest, out, parts] = process.argv.slice(2);
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	await con.run('SET threads = 1');
	const q = (s) => s.replaceAll("'", "''");
	for (let k = 0; k < Number(parts); k++) {
		await con.run(`COPY (
			SELECT b.content AS image, m.caption AS caption, m.conversations AS conversations
			FROM read_json('${q(manifest)}', format = 'newline_delimited', columns = {
				part: 'INTEGER', "row": 'INTEGER', file: 'VARCHAR', caption: 'VARCHAR',
				conversations: 'STRUCT("from" VARCHAR, "value" VARCHAR)[]'}) m
			LEFT JOIN read_blob('${q(out)}/images/*') b ON b.filename = m.file
			WHERE m.part = ${k} ORDER BY m."row"
		) TO '${q(out)}/d/part-${k}.parquet' (FORMAT parquet, COMPRESSION snappy)`);
	}
}

main().catch((e) => { console.error(e); process.exit(1); });
