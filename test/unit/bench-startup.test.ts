import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { runFailure } from '../../bench/startup.js';

const run = (args: string[], timeout: number) =>
  new Promise<Parameters<typeof runFailure>[0]>((resolve) => execFile(process.execPath, args, { timeout }, (err) => resolve(err)));

test("a start-up run that timed out or was killed says so, instead of 'exit 1'", async () => {
  assert.equal(runFailure(await run(['-e', ''], 10_000), 10_000), undefined);
  assert.equal(runFailure(await run(['-e', 'process.exit(3)'], 10_000), 10_000), 'exit 3');
  assert.equal(runFailure(await run(['-e', 'setTimeout(() => {}, 60_000)'], 300), 300), 'killed by SIGTERM after the 0.3 s timeout');
  assert.equal(runFailure(await run(['-e', 'process.kill(process.pid, "SIGKILL")'], 10_000), 10_000), 'killed by SIGKILL');
});
