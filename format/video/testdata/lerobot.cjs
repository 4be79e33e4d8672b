// lerobot.cjs writes the Parquet files of a LeRobot v3 dataset with DuckDB
// (a writer independent of the arrow-go that format/video reads with), for
// format/video's TestLeRobot: the data files, the episodes' table and the
// tasks, with the columns LeRobot writes (lerobot/datasets/dataset_writer.py,
// dataset_metadata.py, and the v2.1 to v3.0 conversion script). The videos
// and meta/info.json are the test's. Usage:
//
//	NODE_PATH=$(scripts/ensure-duckdb.sh --print-path)/node_modules node lerobot.cjs SPEC.json OUTDIR
//
// SPEC: {"fps": 10, "cameras": [...], "tasks": [...], "data_files": [[0, 1], [2]],
//        "episodes": [{"length": 12, "task": 0, "videos": {"cam": {"file": 0, "from": 0, "to": 1.2}}}]}
const { DuckDBInstance } = require('@duckdb/node-api');
const fs = require('fs');
const path = require('path');

const [specPath, out] = process.argv.slice(2);
if (!specPath || !out) {
	console.error('usage: node lerobot.cjs SPEC.json OUTDIR');
	process.exit(2);
}
const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
const q = (s) => '"' + s.replace(/"/g, '""') + '"';
const lit = (s) => "'" + s.replace(/'/g, "''") + "'";

async function main() {
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	const copy = async (sql, file) => {
		fs.mkdirSync(path.dirname(path.join(out, file)), { recursive: true });
		await con.run(`COPY (${sql}) TO ${lit(path.join(out, file))} (FORMAT PARQUET)`);
	};
	// Episodes' rows: global index, episode, frame.
	let from = 0;
	const eps = spec.episodes.map((e, i) => {
		const r = { index: i, from, to: from + e.length, length: e.length, task: e.task, videos: e.videos };
		from += e.length;
		return r;
	});
	const dataFileOf = {};
	spec.data_files.forEach((f, fi) => f.forEach((e) => (dataFileOf[e] = fi)));
	for (const [fi, members] of spec.data_files.entries()) {
		const rows = [];
		for (const e of members) {
			const ep = eps[e];
			rows.push(`SELECT i AS gi, i - ${ep.from} AS fi, ${e} AS ep, ${ep.task} AS task FROM range(${ep.from}, ${ep.to}) t(i)`);
		}
		const sql = `SELECT
			[CAST(gi * 0.5 AS FLOAT), CAST(ep AS FLOAT)] AS ${q('observation.state')},
			[CAST(gi AS FLOAT), CAST(-gi AS FLOAT)] AS action,
			CAST(fi / ${spec.fps} AS FLOAT) AS timestamp,
			fi::BIGINT AS frame_index,
			ep::BIGINT AS episode_index,
			gi::BIGINT AS ${q('index')},
			task::BIGINT AS task_index
			FROM (${rows.join(' UNION ALL ')}) ORDER BY gi`;
		await copy(sql, `data/chunk-000/file-${String(fi).padStart(3, '0')}.parquet`);
	}
	// The episodes' table.
	const cols = (e) => {
		const c = [
			`${e.index}::BIGINT AS episode_index`,
			`[${lit(spec.tasks[e.task])}] AS tasks`,
			`${e.length}::BIGINT AS length`,
			`0::BIGINT AS ${q('data/chunk_index')}`,
			`${dataFileOf[e.index]}::BIGINT AS ${q('data/file_index')}`,
			`${e.from}::BIGINT AS dataset_from_index`,
			`${e.to}::BIGINT AS dataset_to_index`,
		];
		for (const cam of spec.cameras) {
			const v = e.videos[cam];
			c.push(`0::BIGINT AS ${q(`videos/${cam}/chunk_index`)}`);
			c.push(`${v.file}::BIGINT AS ${q(`videos/${cam}/file_index`)}`);
			c.push(`${v.from}::DOUBLE AS ${q(`videos/${cam}/from_timestamp`)}`);
			c.push(`${v.to}::DOUBLE AS ${q(`videos/${cam}/to_timestamp`)}`);
		}
		c.push(`0::BIGINT AS ${q('meta/episodes/chunk_index')}`, `0::BIGINT AS ${q('meta/episodes/file_index')}`);
		return 'SELECT ' + c.join(', ');
	};
	await copy(eps.map(cols).join(' UNION ALL '), 'meta/episodes/chunk-000/file-000.parquet');
	await copy(spec.tasks.map((t, i) => `SELECT ${i}::BIGINT AS task_index, ${lit(t)} AS task`).join(' UNION ALL '), 'meta/tasks.parquet');
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
