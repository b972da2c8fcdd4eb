#!/usr/bin/env node
// `npm test` runner. Node 20's `node --test` does not expand globs (quoted
// 'dist/test/**/*.test.js' is taken as a file name and fails) and, given a directory, also
// runs every helper under a test/ folder. So list the compiled *.test.js files here.
// tsc never deletes output, so a compiled test whose .ts source is gone is skipped, not run.
// Extra arguments go to `node --test`; any *.js among them replaces the discovered list.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TEST_DIR = join(ROOT, 'dist', 'test');

/** dist/test/unit/x.test.js → test/unit/x.test.ts */
function hasSource(compiled) {
  return existsSync(join(ROOT, relative(join(ROOT, 'dist'), compiled)).replace(/\.js$/, '.ts'));
}

function* walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.name.endsWith('.test.js') && hasSource(path)) yield relative(ROOT, path);
  }
}

const extra = process.argv.slice(2);
const chosen = extra.filter((arg) => arg.endsWith('.js'));
const files = chosen.length > 0 ? chosen : [...walk(TEST_DIR)].sort();
const options = extra.filter((arg) => !arg.endsWith('.js'));
if (files.length === 0) {
  console.error(`no *.test.js under ${relative(ROOT, TEST_DIR)}; run npm run build first`);
  process.exit(1);
}

// The TAP stream as before, and the failures alone into a file printed last: a log's tail then
// names every failed test however long the run (scripts/failure-summary.mjs).
const summaryDir = mkdtempSync(join(tmpdir(), 'proxyout-test-summary-'));
const summaryFile = join(summaryDir, 'failures.txt');
const reporters = options.some((arg) => arg.startsWith('--test-reporter'))
  ? []
  : [
      '--test-reporter=tap',
      '--test-reporter-destination=stdout',
      `--test-reporter=${join(ROOT, 'scripts', 'failure-summary.mjs')}`,
      `--test-reporter-destination=${summaryFile}`,
    ];
const args = ['--test', '--test-concurrency=2', '--test-timeout=300000', ...reporters, ...options, ...files];
const result = spawnSync(process.execPath, args, { cwd: ROOT, stdio: 'inherit' });
const failures = existsSync(summaryFile) ? readFileSync(summaryFile, 'utf8') : '';
rmSync(summaryDir, { recursive: true, force: true });
if (failures.trim() !== '') {
  process.stdout.write(`\n# ==== failed tests (details above, in the TAP stream) ====\n${failures}`);
}
process.exit(result.status ?? 1);
