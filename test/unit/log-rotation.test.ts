// The managed daemon's log rotates by size (FILE copied to FILE.1 and emptied in place, FILE.1 →
// … → FILE.keep, the oldest dropped), the daemon's stderr keeps landing in FILE, and `logs -f`
// (streamLog) keeps following across rotations without losing or repeating a line.
import { test } from 'node:test';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/core/log.js';
import { RotatingLogFile } from '../../src/managed/rotating-log.js';
import { LogReader, streamLog } from '../../src/managed/logs.js';
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

test("the daemon's stderr, opened on FILE before any rotation, still writes into the FILE `logs` shows", async (t) => {
  const file = path.join(tempDir(t), 'daemon.log');
  // As connect opens it for the daemon's stdio.
  const stderr = openSync(file, 'a', 0o600);
  t.after(() => closeSync(stderr));
  const log = createLogger('info', new RotatingLogFile(file, { maxBytes: 1000, keep: 2 }));
  for (let n = 0; n < 100; n++) log.info({ n, pad: 'x'.repeat(40) }, 'line');
  assert.ok(existsSync(`${file}.2`), 'rotated more than keep times');
  // What only the runtime writes, straight to descriptor 2: V8's out-of-memory abort.
  writeSync(stderr, 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n');
  const shown: string[] = [];
  await streamLog(file, (line) => shown.push(line), { follow: false, isDone: async () => true });
  assert.match(shown.at(-1) ?? '', /^FATAL ERROR: Reached heap limit/);
  assert.equal(numbers(shown.slice(0, -1).join('\n')).at(-1), 99, 'after the last lines the logger wrote');
});

test('a follower that falls behind a rotation reads the rest from FILE.1, then FILE: every line once', (t) => {
  const file = path.join(tempDir(t), 'daemon.log');
  const log = createLogger('info', new RotatingLogFile(file, { maxBytes: 2000, keep: 2 }));
  log.info({ n: 0 }, 'first');
  const reader = new LogReader(file);
  t.after(() => reader.close());
  const seen = numbers(reader.readLines().join('\n'));
  // One rotation and then more lines than the reader had read, between two of its looks.
  let n = 1;
  while (!existsSync(`${file}.1`)) log.info({ n: n++, pad: 'x'.repeat(40) }, 'line');
  for (const end = n + 5; n < end;) log.info({ n: n++, pad: 'x'.repeat(40) }, 'line');
  seen.push(...numbers(reader.readLines().join('\n')));
  assert.deepEqual(
    seen,
    Array.from({ length: n }, (_, i) => i),
  );
  // Emptied by another hand (logrotate copytruncate with dateext: its copy is not FILE.1), with an
  // older FILE.1 there: that one is not taken for the rest, FILE is read from its start.
  writeFileSync(`${file}.1`, '{"n":-1}\n'.repeat(400));
  truncateSync(file, 0);
  const start = n;
  for (const end = n + 3; n < end;) log.info({ n: n++ }, 'line');
  assert.deepEqual(numbers(reader.readLines().join('\n')), [start, start + 1, start + 2]);
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

test('a log of 200,000 lines is read whole: its lines are not passed as arguments (the stack overflowed at ~125k)', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-log-lines-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'big.log');
  writeFileSync(file, '{"level":30,"time":1,"pid":1,"msg":"x"}\n'.repeat(200_000));
  const reader = new LogReader(file);
  assert.equal(reader.readLines().length, 200_000);
  // Emptied in place and written again past where we were: the copy's rest, then the new file.
  writeFileSync(`${file}.1`, readFileSync(file));
  writeFileSync(file, '{"level":30,"time":2,"pid":1,"msg":"y"}\n'.repeat(200_001));
  assert.equal(reader.readLines().length, 200_001);
});
