// A dead path to the API server: bytes to and from it silently stop (no RST, no FIN: a relay that
// stops forwarding, test/helpers/tcp-gate.ts 'blackhole'), then flow again. An open tunnel is found
// dead within --keepalive + --keepalive-timeout though its client keeps sending a little; a request
// fails within the connect timeout, and at once once the route knows its path is dead, naming the
// route; the route shows degraded; everything serves again within seconds of the path coming back,
// without a restart — also when what was open across it stays dead (a NAT that forgot it): the
// watches are renewed once the server answers again. Real CLI, real curl, the simulated cluster
// behind the relay.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';
import { openStream, closedWithin } from '../helpers/streams.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let gate: TcpGate;
let proxy: ProxyProcess;
before(async () => {
  cluster = await startTestCluster();
  const api = new URL(cluster.sim.server);
  gate = await startTcpGate({ host: api.hostname, port: Number(api.port) });
  const kubeconfig = path.join(cluster.dir, 'via-gate');
  await cluster.sim.writeKubeconfig(kubeconfig, { namespace: 'shop', server: gate.url });
  proxy = await startProxyProcess([
    '--kubeconfig',
    kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--keepalive',
    '2s',
    '--keepalive-timeout',
    '2s',
    '--connect-timeout',
    '5s',
  ]);
});
after(async () => {
  gate?.set('pass');
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await gate?.close();
  await cluster.close();
});

test('bytes silently stop: the tunnel is found dead, requests fail at once naming the route, all serves again when they flow', async () => {
  assert.match((await curl(['-sS', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/'])).stdout, /hello from/);
  // A long-lived stream whose client keeps sending a little (a few bytes every 300 ms).
  const held = await openStream(proxy.socks!, 'echo.data', 7000);
  held.socket.on('error', () => {});
  const trickle = setInterval(() => held.socket.write('ping\n'), 300);
  try {
    await new Promise((r) => setTimeout(r, 600));
    gate.set('blackhole');
    const deadAt = Date.now();
    // --keepalive 2s + --keepalive-timeout 2s: found within about 4 s (a little slack for the ping's timing).
    await closedWithin(held.socket, 8_000, 'the stream on the dead path');
    assert.ok(Date.now() - deadAt <= 6_500, `closed ${Date.now() - deadAt} ms after the path died`);
  } finally {
    clearInterval(trickle);
  }

  // The first request waits at most the connect timeout; once the route knows, later ones fail at once.
  const first = Date.now();
  const r1 = await curl(['-sS', '-w', '\n%{http_code}', '-x', `http://${proxy.http}`, 'http://api.shop/']);
  assert.ok(Date.now() - first <= 6_500, `first request answered in ${Date.now() - first} ms (connect timeout 5 s)`);
  assert.match(r1.stdout, /cluster route \S+[^\n]*\n+50[24]$/);
  await eventually(async () => proxy.logs.some((l) => l.msg === 'cluster route degraded'), 5_000, 100);
  for (let i = 0; i < 3; i++) {
    const started = Date.now();
    const r = await curl(['-sS', '-w', '\n%{http_code}', '-x', `http://${proxy.http}`, 'http://web.shop:8080/']);
    assert.ok(Date.now() - started <= 3_000, `answered in ${Date.now() - started} ms once the route knows`);
    assert.match(r.stdout, /cluster route \S+: the API server \S+ does not answer[^\n]*\n+502$/);
  }

  gate.set('pass');
  const backAt = Date.now();
  await eventually(
    async () => /hello from/.test((await curl(['-sS', '--max-time', '3', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/'])).stdout),
    10_000,
    200,
  );
  assert.ok(Date.now() - backAt <= 5_000, `serving ${Date.now() - backAt} ms after the path came back`);
  assert.ok(proxy.logs.some((l) => l.msg === 'cluster route serving again'));
});

test('behind a NAT that forgot every connection while the path was dead: the watches are renewed when the server answers again', async () => {
  const sim = cluster.sim;
  assert.match((await curl(['-sS', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/'])).stdout, /hello from/);
  const mark = proxy.logs.length;
  gate.set('blackhole');
  // A failed request makes the route look at its path (it then shows degraded).
  await curl(['-sS', '--max-time', '8', '-x', `socks5h://${proxy.socks}`, 'http://api.shop/']);
  await eventually(async () => proxy.logs.slice(mark).some((l) => l.msg === 'cluster route degraded'), 8_000, 100);
  await sim.createPod({ namespace: 'shop', name: 'during-1', labels: { app: 'during' }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'shop', name: 'during', selector: { app: 'during' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
  // Every connection open before is dead for good, watches included; new ones work.
  gate.forget();
  gate.set('pass');
  const backAt = Date.now();
  await eventually(
    async () => /hello from/.test((await curl(['-sS', '--max-time', '3', '-x', `socks5h://${proxy.socks}`, 'http://during.shop/'])).stdout),
    10_000,
    200,
  );
  assert.ok(Date.now() - backAt <= 5_000, `the Service created meanwhile answered ${Date.now() - backAt} ms after the return`);
  assert.ok(proxy.logs.slice(mark).some((l) => l.msg === 'the API server answers again; renewing the watches'));
});
