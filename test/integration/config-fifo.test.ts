// A config file swapped for a FIFO (mkfifo config.yaml), then SIGHUP: the reload must not block
// the process on the read (every request would time out until something writes to the FIFO). It
// is refused at once, the table stays as it was, and the proxy keeps serving. Also at start, and
// for a kubeconfig that is a FIFO. Real CLI, real curl, the simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let config: string;
before(async () => {
  cluster = await startTestCluster();
  config = path.join(cluster.dir, 'config.yaml');
  writeFileSync(config, 'direct: false\n');
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0']);
});
after(async () => {
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster.close();
});

test('SIGHUP with the config file a FIFO: refused at once, the proxy keeps serving', async () => {
  rmSync(config);
  execFileSync('mkfifo', [config]);
  const mark = proxy.logs.length;
  proxy.proc.kill('SIGHUP');
  const failed = await eventually(async () => proxy.logs.slice(mark).find((l) => l.msg === 'reload failed; the routing table is unchanged'), 5_000, 50);
  assert.match(String(failed.error ?? failed.reason ?? JSON.stringify(failed)), /is not a regular file/);
  const started = Date.now();
  const r = await curl(['-sS', '--max-time', '5', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/']);
  assert.match(r.stdout, /hello from/);
  assert.ok(Date.now() - started < 3_000, `served in ${Date.now() - started} ms`);
});

test('a FIFO as the config file or the kubeconfig at start: a one-line error, at once', async () => {
  const fifoKubeconfig = path.join(cluster.dir, 'kubeconfig-fifo');
  execFileSync('mkfifo', [fifoKubeconfig]);
  for (const [args, what] of [
    [['--kubeconfig', cluster.kubeconfig, '--config', config], /config file: \S+ is not a regular file/],
    [['--kubeconfig', fifoKubeconfig], /kubeconfig: \S+ is not a regular file/],
  ] as const) {
    const started = Date.now();
    const r = await runCli([...args, '--listen-socks', '127.0.0.1:0'], { timeoutMs: 10_000 });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, what);
    assert.ok(Date.now() - started < 8_000);
  }
});
