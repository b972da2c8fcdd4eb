// The managed daemon's log rotates by size (FILE → FILE.1 → … → FILE.keep, the oldest dropped),
// and `logs -f` (streamLog) keeps following across rotations without losing or repeating a line.
import { test } from 'node:test';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/core/log.js';
import { RotatingLogFile } from '../../src/managed/rotating-log.js';
import { streamLog } from '../../src/managed/logs.js';
import { waitFor } from './socks-fixtures.test.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-rotate-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const numbers = (text: string): number[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { n: number }).n);

test('by size: at most keep rotated files, each about maxBytes, newest lines kept in order, mode 0600', (t) => {
  const file = path.join(tempDir(t), 'daemon.log');
  const dest = new RotatingLogFile(file, { maxBytes: 2000, keep: 2 });
  const log = createLogger('info', dest);
  for (let n = 0; n < 200; n++) log.info({ n, pad: 'x'.repeat(40) }, 'line');
  assert.ok(existsSync(`${file}.1`) && existsSync(`${file}.2`));
  assert.equal(existsSync(`${file}.3`), false, 'the oldest is dropped');
  const lineBytes = readFileSync(file, 'utf8').split('\n')[0]!.length + 1;
  for (const f of [file, `${file}.1`, `${file}.2`]) {
    assert.ok(statSync(f).size < 2000 + lineBytes, `${f} is ${statSync(f).size} bytes`);
    assert.equal(statSync(f).mode & 0o777, 0o600, f);
  }
  const kept = [`${file}.2`, `${file}.1`, file].flatMap((f) => numbers(readFileSync(f, 'utf8')));
  assert.equal(kept.at(-1), 199);
  assert.deepEqual(
    kept,
    kept.map((_, i) => kept[0]! + i),
    'contiguous and in order across the files',
  );
});

test('an existing file counts toward the size: a restarted daemon rotates on time', (t) => {
  const file = path.join(tempDir(t), 'daemon.log');
  const first = createLogger('info', new RotatingLogFile(file, { maxBytes: 1000, keep: 1 }));
  for (let n = 0; n < 8; n++) first.info({ n, pad: 'x'.repeat(40) }, 'line');
  const second = createLogger('info', new RotatingLogFile(file, { maxBytes: 1000, keep: 1 }));
  for (let n = 8; n < 16; n++) second.info({ n, pad: 'x'.repeat(40) }, 'line');
  assert.ok(existsSync(`${file}.1`), 'rotated although the second writer wrote under 1000 bytes itself');
});

test('logs -f follows across rotations: every line once, in order', async (t) => {
  const file = path.join(tempDir(t), 'daemon.log');
  const log = createLogger('info', new RotatingLogFile(file, { maxBytes: 1500, keep: 3 }));
  log.info({ n: 0 }, 'first');
  const seen: number[] = [];
  const abort = new AbortController();
  const following = streamLog(file, (line) => seen.push((JSON.parse(line) as { n: number }).n), {
    follow: true,
    pollMs: 10,
    isDone: async () => false,
    signal: abort.signal,
  });
  let n = 1;
  // Batches of 8 lines (~700 bytes): every other batch rotates the file under the reader.
  for (let batch = 0; batch < 8; batch++) {
    for (let i = 0; i < 8; i++) log.info({ n: n++, pad: 'x'.repeat(40) }, 'line');
    await waitFor(() => seen.length === n, 3000, `lines up to ${n - 1} followed`);
  }
  abort.abort();
  await following;
  assert.ok(existsSync(`${file}.3`), 'the file rotated several times meanwhile');
  assert.deepEqual(
    seen,
    Array.from({ length: n }, (_, i) => i),
  );
});

test('a log whose directory was removed under it: rotation and SIGHUP reopen fail quietly, the writer goes on and recovers', (t) => {
  const dir = path.join(tempDir(t), 'proxies', 'abc');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'daemon.log');
  const dest = new RotatingLogFile(file, { maxBytes: 500, keep: 2 });
  const log = createLogger('info', dest);
  log.info({ n: 0 }, 'before');
  rmSync(dir, { recursive: true, force: true });
  // Several rotations' worth: each would reopen a file that cannot be created.
  assert.doesNotThrow(() => {
    for (let n = 1; n < 50; n++) log.info({ n, pad: 'x'.repeat(40) }, 'line');
  });
  assert.doesNotThrow(() => dest.reopen(), 'SIGHUP');
  // The directory comes back (a new connect, or the user): the next reopen writes there again.
  mkdirSync(dir, { recursive: true });
  dest.reopen();
  log.info({ n: 50 }, 'after');
  assert.deepEqual(numbers(readFileSync(file, 'utf8')), [50]);
});

test('a log whose writes fail (a full disk: /dev/full) lets flushSync return; the crash handler and a second signal call it', async (t) => {
  if (!existsSync('/dev/full')) return t.skip('no /dev/full here (Linux only)');
  // In a child process: sonic-boom 4's flushSync retried ENOSPC for ever in a sleep loop, which
  // would hang this test process too.
  const script = `
    const { RotatingLogFile } = await import(${JSON.stringify(new URL('../../src/managed/rotating-log.js', import.meta.url).href)});
    const dest = new RotatingLogFile('/dev/full');
    dest.write('{"msg":"one"}\\n');
    dest.flushSync();
    process.stdout.write('returned');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  clearTimeout(killer);
  assert.deepEqual([code, signal, out], [0, null, 'returned'], 'flushSync returned and the process exited');
});
