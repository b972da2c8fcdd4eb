// A route a reload made anew keeps carrying its open streams on its own tunnels until they end.
// After a sleep those tunnels must be checked like the others' (a PING answered within 3 s, or
// the tunnel closes): they were passed over, so a stream on a tunnel that died in the sleep hung
// until the keepalive found it (up to 25 s) while `status` showed it open. Real CLI, simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { closedWithin, openStream, roundTrip, sleep } from '../helpers/streams.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let dir: string;
let kubeconfig: string;
before(async () => {
  cluster = await startTestCluster();
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-pause-reload-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  copyFileSync(cluster.kubeconfig, kubeconfig);
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'spdy', '--log-level', 'debug']);
});
after(async () => {
  proxy?.proc.kill('SIGCONT');
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster.close();
  rmSync(dir, { recursive: true, force: true });
});

test('after a sleep, a stream on a replaced route’s tunnel that died meanwhile ends within seconds', async () => {
  const held = await openStream(proxy.socks!, 'echo.data', 7000);
  held.socket.on('error', () => undefined);
  assert.equal((await roundTrip(held, Buffer.from('x'))).toString(), 'x');
  // The same API server by another name: the route is made anew; the held stream stays on the old one.
  const mark = proxy.logs.length;
  writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace('https://127.0.0.1:', 'https://localhost:'));
  proxy.proc.kill('SIGHUP');
  await eventually(async () => proxy.logs.slice(mark).some((l) => l.msg === 'routing table reloaded'), 15_000, 50);
  assert.equal((await roundTrip(held, Buffer.from('y'))).toString(), 'y', 'still flowing after the reload');
  // The tunnel goes silent while the proxy sleeps (a NAT that forgot it).
  assert.ok(cluster.sim.freezeSpdySessions() >= 1);
  proxy.proc.kill('SIGSTOP');
  await sleep(7_000);
  proxy.proc.kill('SIGCONT');
  // The check after a pause: a PING within 3 s, else the tunnel closes (the keepalive takes up to 25 s).
  await closedWithin(held.socket, 8_000, 'the stream on the replaced route’s silent tunnel');
});
