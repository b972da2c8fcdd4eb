// stderr to a pipe whose reader is gone or has stopped reading must not keep the proxy from
// exiting (sonic-boom's flushSync retried EPIPE and EAGAIN for ever at exit, core/log.ts). Node's
// child_process pipes are socketpairs, written like a shell's pipe: EPIPE once the reader closed,
// EAGAIN (non-blocking) while it does not read.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess } from '../helpers/proxy-process.js';

const logModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/core/log.js');
let cluster: TestCluster;

before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

/** Resolves with the exit code or signal, or 'hung' (after killing it) when it has not exited within ms. */
async function exitWithin(proc: ChildProcess, ms: number): Promise<number | NodeJS.Signals | 'hung'> {
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode ?? proc.signalCode!;
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    once(proc, 'exit').then(([code, signal]) => (code as number | null) ?? (signal as NodeJS.Signals)),
    new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms))),
  ]);
  clearTimeout(timer);
  if (result === 'hung') proc.kill('SIGKILL');
  return result;
}

/** A process that logs `lines` JSON lines through createLogger (stderr) when told on stdin, then `end`s: exit, or flush and exit. */
function burstLogger(lines: number, end: 'exit' | 'flush'): ChildProcess {
  const exit = end === 'exit' ? 'process.exit(0)' : 'log.flush(() => process.exit(0))';
  const script = `
    const { createLogger } = await import(${JSON.stringify(logModule)});
    const log = createLogger('info');
    process.stdin.once('data', () => {
      for (let n = 0; n < ${lines}; n++) log.info({ n, pad: 'x'.repeat(200) }, 'line');
      ${exit};
    });
    process.stdout.write('ready\\n');`;
  return spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
}

test('a foreground proxy whose stderr reader has gone stops on SIGTERM and frees its port', async () => {
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
  const port = Number(proxy.socks!.split(':')[1]);
  // The reader closes (a `| head` that is done, a log collector that died); the lines the proxy
  // logs on its way out then meet EPIPE.
  // Once it has logged that it is ready, it has nothing more to say until it is told to stop.
  await eventually(async () => proxy.logs.some((l) => l.msg === 'proxy ready'), 10_000, 20);
  proxy.proc.stderr!.destroy();
  await once(proxy.proc.stderr!, 'close'); // our end of the pipe is closed before the proxy writes again
  proxy.proc.kill('SIGTERM');
  assert.equal(await exitWithin(proxy.proc, 20_000), 0, 'the proxy exits 0 instead of hanging at exit');
  const s = net.connect(port, '127.0.0.1');
  const [err] = (await once(s, 'error')) as [NodeJS.ErrnoException];
  assert.equal(err.code, 'ECONNREFUSED', 'its port is free');
});

test('the log does not hold the exit when stderr’s reader has stopped reading (the pipe is full)', async () => {
  for (const end of ['exit', 'flush'] as const) {
    const proc = burstLogger(20_000, end);
    await once(proc.stdout!, 'data');
    proc.stderr!.pause(); // nothing reads: ~5 MB of lines fill the pipe and the rest waits
    proc.stdin!.end('go\n');
    assert.equal(await exitWithin(proc, 20_000), 0, `${end}: the process exits instead of waiting for the reader for ever`);
  }
});

test('a reader that reads gets every line written before a flush and exit', async () => {
  const proc = burstLogger(2_000, 'flush');
  let text = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
  await once(proc.stdout!, 'data');
  proc.stdin!.end('go\n');
  assert.equal(await exitWithin(proc, 20_000), 0);
  const numbers = text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { n: number }).n);
  assert.equal(numbers.length, 2_000, 'no line lost');
  assert.equal(numbers.at(-1), 1_999);
});

test('lines for a reader that stopped reading are bounded: past ~1 MiB queued they are counted, and the count is logged once it reads again', async (t) => {
  const script = `
    const { createLogger } = await import(${JSON.stringify(logModule)});
    const log = createLogger('info');
    process.stdin.once('data', () => {
      for (let n = 0; n < 20000; n++) log.info({ n, pad: 'x'.repeat(200) }, 'line');
      process.stdout.write(String(process.stderr.writableLength) + '\\n');
      process.stdin.once('data', () => log.flush(() => process.exit(0)));
    });
    process.stdout.write('ready\\n');`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  // A failed assertion must not leave it waiting on its stdin (and this file with it).
  t.after(() => proc.kill('SIGKILL'));
  const stdout: string[] = [];
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => stdout.push(...c.split('\n').filter(Boolean)));
  await eventually(async () => stdout.includes('ready'), 10_000, 20);
  proc.stderr!.pause(); // nothing reads while ~5 MB of lines are logged
  proc.stdin!.write('go\n');
  await eventually(async () => stdout.length >= 2, 20_000, 20);
  const queued = Number(stdout[1]);
  assert.ok(queued <= (1 << 20) + 1024, `queued for the reader: ${queued} bytes`);
  let text = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
  proc.stderr!.resume();
  proc.stdin!.end('done\n');
  assert.equal(await exitWithin(proc, 20_000), 0);
  const records = text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { n?: number; dropped?: number; msg: string });
  const report = records.find((r) => r.dropped !== undefined);
  assert.ok(report, 'the drop is reported');
  assert.match(report.msg, /log lines dropped/);
  const delivered = records.filter((r) => r.n !== undefined).length;
  assert.equal(delivered + report.dropped!, 20_000, 'every line is either delivered or counted');
});

test('with --log-format pretty the count of dropped lines is a pretty line too, not JSON', async (t) => {
  const formatModule = logModule.replace(/log\.js$/, 'log-format.js');
  const script = `
    const { createLogger } = await import(${JSON.stringify(logModule)});
    const { stderrDestination } = await import(${JSON.stringify(formatModule)});
    const log = createLogger('info', stderrDestination('pretty'));
    process.stdin.once('data', () => {
      for (let n = 0; n < 20000; n++) log.info({ n, pad: 'x'.repeat(200) }, 'line');
      process.stdout.write('logged\\n');
      process.stdin.once('data', () => log.flush(() => process.exit(0)));
    });
    process.stdout.write('ready\\n');`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  t.after(() => proc.kill('SIGKILL'));
  const stdout: string[] = [];
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => stdout.push(...c.split('\n').filter(Boolean)));
  await eventually(async () => stdout.includes('ready'), 10_000, 20);
  proc.stderr!.pause();
  proc.stdin!.write('go\n');
  await eventually(async () => stdout.includes('logged'), 20_000, 20);
  let text = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
  proc.stderr!.resume();
  proc.stdin!.end('done\n');
  assert.equal(await exitWithin(proc, 20_000), 0);
  const lines = text.split('\n').filter(Boolean);
  const report = lines.find((l) => l.includes('log lines dropped'));
  assert.ok(report, 'the drop is reported');
  assert.doesNotMatch(report, /^\{/, `a pretty line: ${report}`);
  assert.match(report, /^\[[\d:.]+\] WARN: log lines dropped: stderr's reader did not keep up \{"dropped":(\d+)\}$/);
  const dropped = Number(/"dropped":(\d+)/.exec(report)![1]);
  const delivered = lines.filter((l) => / INFO: line \{"n":\d+,/.test(l)).length;
  assert.equal(delivered + dropped, 20_000, 'every line is either delivered or counted');
});

test('a flush waits for what is written while the queue drains: the count of dropped lines reaches the reader before the exit', async (t) => {
  // The first listener of the drain writes 512 KiB more (more than the pipe holds), as anything
  // written on a drain would; the count follows it. Flush was asked for before the reader read.
  const script = `
    const { createLogger } = await import(${JSON.stringify(logModule)});
    const log = createLogger('info');
    process.stdin.once('data', () => {
      process.stderr.once('drain', () => process.stderr.write('#'.repeat(512 * 1024) + '\\n'));
      for (let n = 0; n < 20000; n++) log.info({ n, pad: 'x'.repeat(200) }, 'line');
      log.flush(() => process.exit(0));
      process.stdout.write('logged\\n');
    });
    process.stdout.write('ready\\n');`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  t.after(() => proc.kill('SIGKILL'));
  const stdout: string[] = [];
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => stdout.push(...c.split('\n').filter(Boolean)));
  await eventually(async () => stdout.includes('ready'), 10_000, 20);
  proc.stderr!.pause();
  proc.stdin!.write('go\n');
  await eventually(async () => stdout.includes('logged'), 20_000, 20);
  let text = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
  proc.stderr!.resume();
  assert.equal(await exitWithin(proc, 20_000), 0);
  const lines = text.split('\n').filter(Boolean);
  assert.ok(lines.includes('#'.repeat(512 * 1024)), 'what the drain wrote arrived whole');
  const report = lines.find((l) => l.includes('log lines dropped'));
  assert.ok(report, 'the count of dropped lines arrived before the exit');
});
