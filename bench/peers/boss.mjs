// bench/peers/boss.mjs: pg-boss, a `stately` queue with singletonKey = the
// object id (one queued and one active job per object: a webhook for an
// object already queued is dropped, one arriving while its job runs queues
// one follow-up).
//   node boss.mjs work CONNSTRING BASE_URL LOCAL_CONCURRENCY BATCH_SIZE POOL_SIZE
//     workers: LOCAL_CONCURRENCY pollers x BATCH_SIZE jobs each, the jobs of a
//     batch fetched concurrently, each stored with store_post() (one transaction).
//   node boss.mjs sql CONNSTRING
//     prints the statement send() runs (creating the queue if need be), its
//     one parameter $1 the object id (bench/peers/storm_send.py and intake).
//   node boss.mjs send CONNSTRING FIRST LAST BATCH [RATE]
//     the intake: plan rows FIRST..LAST, BATCH at a time: their `sent` rows,
//     then boss.send() of each, concurrently; paced to RATE a second if given.
import { PgBoss } from 'pg-boss';
import pg from 'pg';

const [mode, connectionString, ...args] = process.argv.slice(2);
const queue = 'fetch_post';

if (mode === 'work') {
	const [base, localConcurrency, batchSize, pool] = args.map((a, i) => (i ? Number(a) : a));
	const boss = new PgBoss({ connectionString, max: pool });
	boss.on('error', (e) => console.error('error:', e.message));
	await boss.start();
	if (!(await boss.getQueue(queue))) await boss.createQueue(queue, { policy: 'stately', notify: true });
	const db = new pg.Pool({ connectionString, max: pool });
	await boss.work(queue, { localConcurrency, batchSize, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true },
		async (jobs) => {
			await Promise.all(jobs.map(async (job) => {
				const r = await fetch(`${base}/posts/${encodeURIComponent(job.data.id)}`);
				if (!r.ok) throw new Error(`GET ${job.data.id}: ${r.status}`);
				await db.query('SELECT store_post($1::jsonb)', [await r.json()]);
			}));
		});
	console.log('ready', process.pid);
	const stop = async () => { await boss.stop({ graceful: false, wait: false }); await db.end(); process.exit(0); };
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);
} else if (mode === 'send') {
	const [first, last, batch, rate = 0] = args.map(Number);
	const t0 = Date.now();
	const boss = new PgBoss({ connectionString, max: 8, supervise: false, schedule: false, migrate: false });
	await boss.start();
	const db = new pg.Client({ connectionString });
	await db.connect();
	for (let lo = first; lo <= last; lo += batch) {
		const hi = Math.min(last, lo + batch - 1);
		const { rows } = await db.query(
			`INSERT INTO sent SELECT seq, object_id, clock_timestamp() FROM plan WHERE seq BETWEEN $1 AND $2
			 RETURNING object_id`, [lo, hi]);
		await Promise.all(rows.map((r) => boss.send(queue, { id: r.object_id }, { singletonKey: r.object_id })));
		const wait = rate > 0 ? t0 + (hi / rate) * 1000 - Date.now() : 0;
		if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
	}
	await db.end();
	await boss.stop({ graceful: false, wait: false });
} else if (mode === 'sql') {
	// The statement send() runs for a job of QUEUE with singletonKey OBJ, with
	// its parameter $1 (the job as JSON) written in as replace(the job, 'OBJ',
	// $1) (the job hex-encoded: no quotes or colons in the text for pgbench),
	// so its one parameter is the object id.
	const boss = new PgBoss({ connectionString, supervise: false, schedule: false });
	await boss.start();
	if (!(await boss.getQueue(queue))) await boss.createQueue(queue, { policy: 'stately', notify: true });
	let captured;
	const db = { executeSql: async (text, values) => { captured = { text, values }; return { rows: [] }; } };
	await boss.send(queue, { id: 'OBJ' }, { singletonKey: 'OBJ', db });
	const job = Buffer.from(captured.values[0]).toString('hex');
	if (captured.values.length !== 1 || !captured.text.includes('$1') || captured.text.includes('$2')) throw new Error('unexpected send SQL');
	console.log(captured.text.replaceAll('$1', () => `replace(convert_from(decode('${job}', 'hex'), 'UTF8'), 'OBJ', $1::text)`));
	await boss.stop({ graceful: false, wait: false });
} else {
	console.error('usage: boss.mjs work|send|sql ...');
	process.exit(2);
}
