// drain.js CONNSTRING JOBS CONCURRENCY: run graphile-worker with a no-op
// task until JOBS jobs have succeeded, and print their rate (jobs per
// second, timed from the first success to the last, so that start-up is
// not counted).  Unbatched: graphile-worker's defaults otherwise.
// JOBS 0: install graphile-worker's schema (all its migrations) and exit.
"use strict";
const { run, runMigrations, Logger } = require("graphile-worker");

const quiet = new Logger(() => () => {});

async function main() {
	const [conn, want, concurrency] = process.argv.slice(2);
	const target = Number(want);
	if (target === 0) {
		await runMigrations({ connectionString: conn, logger: quiet });
		return;
	}
	let done = 0;
	let first = null;
	let last = null;
	let finish;
	const finished = new Promise((resolve) => (finish = resolve));
	const runner = await run({
		connectionString: conn,
		concurrency: Number(concurrency),
		noHandleSignals: true,
		pollInterval: 1000,
		logger: quiet,
		taskList: { noop: async () => {} },
	});
	runner.events.on("job:success", () => {
		last = process.hrtime.bigint();
		if (first === null) first = last;
		if (++done === target) finish();
	});
	await finished;
	await runner.stop();
	const seconds = Number(last - first) / 1e9;
	console.log(((done - 1) / seconds).toFixed(1));
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
