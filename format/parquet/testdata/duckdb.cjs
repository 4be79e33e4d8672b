// duckdb.cjs writes Parquet fixtures with DuckDB (a second writer,
// independent of the arrow-go that format/parquet reads with), for
// format/parquet's TestDuckDB, which computes every row's expected
// members from the same formulas. Usage:
//
//	NODE_PATH=$(scripts/ensure-duckdb.sh --print-path)/node_modules node duckdb.cjs OUTDIR
const { DuckDBInstance } = require('@duckdb/node-api');

const out = process.argv[2];
if (!out) {
	console.error('usage: node duckdb.cjs OUTDIR');
	process.exit(2);
}

// The Hub's image layout: image struct{bytes, path} and a label; JPEGs
// named by path, PNGs without one, nulls.
const images = `
SELECT
	CASE WHEN i % 17 = 5 THEN NULL ELSE {
		'bytes': unhex(CASE WHEN i % 2 = 0 THEN 'FFD8FFE0' ELSE '89504E470D0A1A0A' END
			|| repeat(lpad(printf('%x', i % 256), 2, '0'), 100 + i % 50)),
		'path': CASE WHEN i % 2 = 0 THEN 'img_' || i || '.jpg' ELSE NULL END
	} END AS image,
	CASE WHEN i % 13 = 4 THEN NULL ELSE (i % 1000)::BIGINT END AS label
FROM range(250) t(i) ORDER BY i`;

// A column of each kind.
const mixed = `
SELECT
	CASE WHEN i % 11 = 3 THEN NULL ELSE (i % 7 - 3)::INTEGER END AS label,
	CASE WHEN i % 9 = 2 THEN NULL ELSE repeat('ab', (i % 5)::INTEGER) || i::VARCHAR END AS text,
	CASE i % 6 WHEN 1 THEN NULL WHEN 2 THEN []::INTEGER[]
		ELSE list_transform(range((i % 40 + 1)::BIGINT), j -> ((i * 31 + j * 7) % 50000 - 100)::INTEGER) END AS input_ids,
	CASE WHEN i % 8 = 0 THEN NULL ELSE i / 4 END AS score,
	CASE WHEN i % 10 = 7 THEN NULL ELSE {'id': i * 8589934592, 'tags': CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN []::VARCHAR[] ELSE ['a', NULL, i::VARCHAR] END} END AS meta,
	CASE WHEN i % 4 = 1 THEN NULL ELSE (i % 3)::VARCHAR END AS kind
FROM range(5000) t(i) ORDER BY i`;

// Multilingual documents (format/parquet's TestDuckDBTextReference reads
// them back and has the reference library tokenize them): sentences in 12
// languages mixed into documents of 0 to a few thousand bytes. DuckDB's
// VARCHAR is valid UTF-8, so none is invalid here (the arrow-go fixture
// has those).
const parts = [
	'The quick brown fox jumps over the lazy dog. ',
	'Größenordnung: über 3 000 km² — naïve café. ',
	'Съешь же ещё этих мягких французских булок. ',
	'東京は日本の首都です。人口は約1400万人。',
	'北京是中华人民共和国的首都。',
	'서울은 대한민국의 수도이다. ',
	'مرحبا بالعالم، هذا نص عربي. ',
	'שלום עולם, זה טקסט בעברית. ',
	'नमस्ते दुनिया, यह हिंदी है। ',
	'Γειά σου Κόσμε, αυτό είναι ελληνικά. ',
	'สวัสดีชาวโลก นี่คือภาษาไทย ',
	'Ça va? Él está aquí. Ñandú. ',
	'🙂 emoji 👩‍💻 and combining e\u0301 a\u0308 ',
	'tabs\tand\nnewlines\r\n  spaces   ',
	'1234567890 3.14159 -42 ',
];
const texts = [];
for (let i = 0; i < 300; i++) {
	const n = i % 50 === 49 ? 400 : (i * 7) % 23;
	let s = '';
	for (let j = 0; j < n; j++) s += parts[(i * 5 + j * 3) % parts.length];
	texts.push(s);
}

// The reproduction of a damaged chunk: the Hub's layout, 60 rows
// (one row group, one chunk), each image a JPEG's first bytes and 1,920
// bytes of hex digits, in ZSTD, gzip and snappy pages; the test
// overwrites 1,000 bytes in the middle of each.
const hub = `
SELECT
	{'bytes': unhex('FFD8FFE0') || (SELECT string_agg(md5(i::VARCHAR || '-' || j::VARCHAR), '' ORDER BY j) FROM range(60) t2(j))::BLOB,
	 'path': 'img_' || i || '.jpg'} AS image,
	(i % 10)::BIGINT AS label
FROM range(60) t(i) ORDER BY i`;

async function main() {
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	await con.run('SET threads = 1');
	await con.run(`COPY (${images}) TO '${out}/images.parquet' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 100)`);
	for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd', 'lz4', 'brotli']) {
		for (const [v, rg] of [["V1", 2048], ["V2", 4096]]) {
			await con.run(`COPY (${mixed}) TO '${out}/mixed-${codec}-${v}.parquet' (FORMAT parquet, COMPRESSION ${codec}, ROW_GROUP_SIZE ${rg}, PARQUET_VERSION ${v})`);
		}
	}
	const rows = texts.map((s, i) => `(${i}, '${s.replace(/'/g, "''")}')`).join(',\n');
	await con.run(`CREATE TABLE texts AS SELECT * FROM (VALUES ${rows}) t(id, text)`);
	await con.run(`COPY (SELECT id::BIGINT AS id, text FROM texts ORDER BY id) TO '${out}/texts.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 64)`);
	for (const codec of ['zstd', 'gzip', 'snappy']) {
		await con.run(`COPY (${hub}) TO '${out}/hub-${codec}.parquet' (FORMAT parquet, COMPRESSION ${codec})`);
	}
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
