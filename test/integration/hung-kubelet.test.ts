// A kubelet that hangs behind an API server that answers (a node gone silent, its pods still
// listed): port-forward requests get no answer, everything else is served. The streams time out,
// the route probes its API server, finds it there, and leaves its watches alone — renewing every
// watch after each such stream loaded the server and logged a return that never was. A tunnel
// that stops answering pings does renew them, the ingress host watches with the rest. Real CLI,
// real curl, the simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { eventually } from '../helpers/cluster.js';
import { openStream, roundTrip } from '../helpers/streams.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--connect-timeout',
    '2s',
    '--keepalive',
    '1s',
    '--keepalive-timeout',
    '1s',
    '--log-level',
    'debug',
  ]);
});
after(async () => {
  cluster.sim.stallPortForwards(false);
  await proxy?.stop();
  await cluster.close();
});

test('streams that time out on a hung kubelet renew no watch: the API server answered all along', async () => {
  const sim = cluster.sim;
  sim.stallPortForwards(true);
  const mark = proxy.logs.length;
  const from = sim.listWatchLog.length;
  for (let i = 0; i < 2; i++) {
    const r = await curl(['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/'], 10_000);
    assert.notEqual(r.code, 0, 'the stream cannot open');
  }
  // The probe each timeout sends is answered at once; wait past it (and past the 5 s renewal bound).
  await new Promise((r) => setTimeout(r, 1500));
  const lines = proxy.logs.slice(mark);
  assert.ok(
    lines.some((l) => l.msg === 'stream failed' || String(l.msg).startsWith('stream failed')),
    'the streams failed',
  );
  assert.equal(lines.filter((l) => l.msg === 'the API server answers again; renewing the watches').length, 0);
  assert.deepEqual(
    sim.listWatchLog.slice(from).map((e) => `${e.verb} ${e.path}`),
    [],
    'no list or watch request: the watches were left as they were',
  );
  assert.ok(!lines.some((l) => l.msg === 'cluster route degraded'), 'the route stays healthy: its API server answers');
});

test('a tunnel that stops answering pings renews the watches: the ingress watch too, as expected, not as a failure', async () => {
  const sim = cluster.sim;
  sim.stallPortForwards(false);
  const held = await openStream(proxy.socks!, 'echo.data', 7000);
  held.socket.on('error', () => {});
  assert.equal((await roundTrip(held, Buffer.from('x'))).toString(), 'x');
  const mark = proxy.logs.length;
  assert.ok(sim.freezeSpdySessions() >= 1);
  await eventually(async () => proxy.logs.slice(mark).some((l) => l.msg === 'the API server answers again; renewing the watches'), 10_000, 50);
  // The renewal cut every watch's connection; each watches again, none of them failing for it,
  // nor finding its connection gone (each was renewed on purpose).
  await new Promise((r) => setTimeout(r, 1500));
  const failed = proxy.logs.slice(mark).filter((l) => String(l.msg).startsWith('watch failed') || l.msg === 'watch connection lost; resuming');
  assert.deepEqual(
    failed.map((l) => `${String(l.path)}: ${String(l.error)}`),
    [],
  );
  held.socket.destroy();
  sim.killSpdySessions();
});
