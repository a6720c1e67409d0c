// bench/peers/gw.mjs: the graphile-worker worker.  Task fetch_post: GET
// BASE/posts/{id} with Node's fetch, then store_post() in one statement (one
// transaction) on graphile-worker's pool.  Jobs are added from SQL by the
// bench (graphile_worker.add_job with job_key = the object id).
// Usage: node gw.mjs CONNSTRING BASE_URL CONCURRENCY POOL_SIZE
import { run, Logger } from 'graphile-worker';

const [connectionString, base, concurrency, pool] = process.argv.slice(2);
const logger = new Logger(() => (level, message) => {
	if (level === 'error' || level === 'warning') console.error(`${level}: ${message}`);
});
const runner = await run({
	connectionString,
	concurrency: Number(concurrency),
	maxPoolSize: Number(pool),
	pollInterval: 1000,
	logger,
	taskList: {
		fetch_post: async (payload, helpers) => {
			const r = await fetch(`${base}/posts/${encodeURIComponent(payload.id)}`);
			if (!r.ok) throw new Error(`GET ${payload.id}: ${r.status}`);
			const post = await r.json();
			await helpers.withPgClient((c) => c.query('SELECT store_post($1::jsonb)', [post]));
		},
	},
});
console.log('ready', process.pid);
await runner.promise;
