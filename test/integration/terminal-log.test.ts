// The foreground proxy's log: friendly lines on a terminal (a real pseudo-terminal, through
// util-linux `script`), JSON lines on a pipe or with --log-format json.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { binPath, startProxyProcess } from '../helpers/proxy-process.js';

const hasScript = spawnSync('script', ['--version']).status === 0;
let cluster: TestCluster;

before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Runs the proxy on a pseudo-terminal until it printed its ready lines; returns what the terminal showed. */
async function onTerminal(extra: string[]): Promise<string> {
  const command = [process.execPath, binPath, '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', ...extra].map(shellQuote).join(' ');
  const proc = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '1' } });
  let out = '';
  proc.stdout.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready: ${out}`)), 30_000);
    proc.stdout.on('data', (c: string) => {
      out += c;
      if (/export ALL_PROXY=/.test(out) && /proxy ready/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  // The complete lines shown so far: the terminal echoes the Ctrl-C as "^C" in front of whatever
  // line the proxy writes next.
  const shown = out.slice(0, out.lastIndexOf('\n') + 1);
  proc.stdin.write('\u0003'); // Ctrl-C on the terminal: SIGINT to the proxy
  await new Promise((r) => proc.once('exit', r));
  return shown;
}

test('on a terminal the log is one coloured human line per event, not JSON', { skip: hasScript ? false : 'util-linux `script` is not installed' }, async () => {
  const out = await onTerminal([]);
  const logLines = out.split(/\r?\n/).filter((l) => /proxy ready|watching/.test(l));
  assert.ok(logLines.length >= 2, out);
  for (const line of logLines) {
    assert.doesNotMatch(line, /^\{/, 'not a JSON line');
    assert.match(line, /^\[\d\d:\d\d:\d\d\.\d{3}\] \u001b\[32mINFO\u001b\[39m: /, JSON.stringify(line));
  }
});

test('--log-format json keeps JSON lines even on a terminal', { skip: hasScript ? false : 'util-linux `script` is not installed' }, async () => {
  const out = await onTerminal(['--log-format', 'json']);
  const ready = out.split(/\r?\n/).find((l) => /proxy ready/.test(l));
  assert.ok(ready, out);
  assert.equal(JSON.parse(ready).msg, 'proxy ready');
});

test('on a pipe (no terminal) the log stays JSON lines', async () => {
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
  try {
    // The log line is written asynchronously: it may arrive after the ready lines on stdout.
    await eventually(async () => proxy.logs.some((l) => l.msg === 'proxy ready'), 5_000, 20).catch(() => assert.fail(proxy.stderr()));
    for (const line of proxy.stderr().split('\n').filter(Boolean)) assert.doesNotThrow(() => JSON.parse(line), line);
  } finally {
    await proxy.stop();
  }
});
