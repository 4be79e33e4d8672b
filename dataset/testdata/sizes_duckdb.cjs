// sizes_duckdb.cjs writes the Parquet file of dataset's TestWriteSizesInPlace
// with DuckDB — a writer independent of arrow-go, which Brand reads with.
// Usage:
//
//	NODE_PATH=$(scripts/ensure-duckdb.sh --print-path)/node_modules \
//	  node sizes_duckdb.cjs PICTURES OUTFILE
//
// A row a file of PICTURES, in the order of their names, in the Hugging
// Face Hub's image layout — image STRUCT(bytes BLOB, path VARCHAR), the
// path the file's name — beside a caption of 64,000 hex digits that do
// not compress, so that a reader of the images alone is told from one
// that reads the rows; row groups of 4 rows, snappy.
const { DuckDBInstance } = require('@duckdb/node-api');

async function main() {
	const [pictures, out] = process.argv.slice(2);
	const q = (s) => s.replaceAll("'", "''");
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	await con.run('SET threads = 1');
	await con.run(`COPY (
		SELECT {'bytes': b.content, 'path': parse_filename(b.filename)} AS image,
			(SELECT string_agg(md5(parse_filename(b.filename) || i::VARCHAR), '' ORDER BY i) FROM range(2000) t(i)) AS caption
		FROM read_blob('${q(pictures)}/*') b ORDER BY parse_filename(b.filename)
	) TO '${q(out)}' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 4)`);
}

main().catch((e) => { console.error(e); process.exit(1); });
