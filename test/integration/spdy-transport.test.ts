// The multiplexed SPDY-over-WebSocket transport, end to end: the real CLI with --transport spdy
// (and auto) against the simulated cluster, driven by raw SOCKS5 streams and real curl.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';
import { deterministicSha256 } from '../sim/cluster.js';
import { SAMPLE } from '../sim/sample.js';
import { statusItem } from '../helpers/status-json.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const echoPod = SAMPLE.echo.pods[0];
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--transport',
    'spdy',
    '--log-level',
    'info',
  ]);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await cluster?.close();
  assert.equal(code, 0, 'the proxy exits 0 on SIGTERM (GOAWAY to its tunnels)');
});

async function open(host = 'echo.data', port = 7000, socks = proxy.socks!): Promise<{ socket: net.Socket; reader: Reader }> {
  const { reply, socket, rest } = await socks5Connect(socks, host, port);
  assert.equal(reply, 0, `SOCKS reply for ${host}:${port}`);
  assert.equal(rest.length, 0);
  return { socket, reader: new Reader(socket) };
}

/** Writes `payload` in pieces and reads the same number of bytes back. */
async function echo(c: { socket: net.Socket; reader: Reader }, payload: Buffer): Promise<Buffer> {
  const back = c.reader.read(payload.length);
  for (let off = 0; off < payload.length; off += 16 * 1024) c.socket.write(payload.subarray(off, off + 16 * 1024));
  return back;
}

test('100 concurrent streams share one tunnel, every byte intact (sha256)', async () => {
  cluster.sim.resetCounters();
  const results = await Promise.all(
    Array.from({ length: 100 }, async (_, i) => {
      const c = await open();
      const payload = randomBytes(32 * 1024 + i * 512);
      const back = await echo(c, payload);
      c.socket.end();
      return sha(back) === sha(payload);
    }),
  );
  assert.equal(results.filter(Boolean).length, 100);
  assert.equal(cluster.sim.counters.portForward, 1, 'one upgrade for all 100 streams');
  assert.equal(cluster.sim.openSpdySessions, 1);
  assert.ok(
    proxy.logs.some((l) => l.msg === 'tunnel opened' && l.transport === 'spdy' && l.pod === `data/${echoPod}`),
    'the log shows the tunnel per pod',
  );
});

test('one stream reset mid-transfer; the others on the same tunnel carry on', async () => {
  cluster.sim.resetCounters();
  const conns = await Promise.all(Array.from({ length: 8 }, () => open()));
  const victim = conns[0]!;
  await echo(victim, Buffer.from('first'));
  const payloads = conns.map(() => randomBytes(512 * 1024));
  const pending = conns.slice(1).map((c, i) => echo(c, payloads[i + 1]!));
  victim.socket.write(randomBytes(64 * 1024));
  victim.socket.resetAndDestroy();
  const backs = await Promise.all(pending);
  backs.forEach((b, i) => assert.equal(sha(b), sha(payloads[i + 1]!), `stream ${i + 1}`));
  assert.equal(cluster.sim.counters.portForward, 0, 'no new tunnel');
  assert.equal(cluster.sim.openSpdySessions, 1);
  for (const c of conns.slice(1)) c.socket.end();
});

test('a tunnel killed mid-flight fails only its own streams; the next connection opens a new tunnel', async () => {
  const echoConns = await Promise.all(Array.from({ length: 5 }, () => open()));
  for (const c of echoConns) await echo(c, Buffer.from('before'));
  const hello = await open('hello.default', 80);
  cluster.sim.resetCounters();
  const closed = echoConns.map((c) => new Promise((resolve) => c.socket.once('close', resolve)));
  assert.equal(cluster.sim.killSpdySessions('data', echoPod), 1);
  await Promise.all(closed);
  // Reset, not ended: their bytes were cut, and a FIN would say they were whole.
  for (const c of echoConns) assert.equal((c.reader.error as NodeJS.ErrnoException | undefined)?.code, 'ECONNRESET');
  // The other pod's tunnel is untouched: HTTP keep-alive on the same stream still answers.
  hello.socket.write('GET / HTTP/1.1\r\nHost: hello\r\n\r\n');
  const head = (await hello.reader.read(17)).toString();
  assert.equal(head, 'HTTP/1.1 200 OK\r\n');
  hello.socket.destroy();
  const again = await open();
  const payload = randomBytes(100_000);
  assert.equal(sha(await echo(again, payload)), sha(payload));
  again.socket.end();
  assert.equal(cluster.sim.counters.portForward, 1, 'a new tunnel for the new connection');
  assert.ok(proxy.logs.some((l) => l.msg === 'tunnel closed' && l.pod === `data/${echoPod}` && typeof l.error === 'string'));
});

test('curl through SOCKS5 and the HTTP listener with --transport spdy', async () => {
  const r = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop:8080/']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^hello from web-/);
  const file = path.join(cluster.dir, 'bytes');
  const big = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://hello.default/bytes/3000000', '--output', file]);
  assert.equal(big.code, 0, big.stderr);
  assert.equal(sha(readFileSync(file)), deterministicSha256(3_000_000));
  const viaHttp = await curl(['-x', `http://${proxy.http}`, 'http://api.shop/whoami']);
  assert.equal(viaHttp.code, 0, viaHttp.stderr);
  assert.equal(JSON.parse(viaHttp.stdout).path, '/whoami');
  const refused = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://echo.data:7001/']);
  assert.notEqual(refused.code, 0, 'a refused pod port fails the connection');
});

test('auto falls back to one WebSocket per stream when the tunnel is refused, and remembers it', async () => {
  cluster.sim.setSpdyTunnel(false);
  const auto = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'info', '--transport', 'auto']);
  try {
    cluster.sim.resetCounters();
    const sessions = cluster.sim.openSpdySessions; // the spdy proxy's idle tunnels
    for (let i = 0; i < 5; i++) {
      const c = await open('echo.data', 7000, auto.socks!);
      assert.equal((await echo(c, Buffer.from(`round ${i}`))).toString(), `round ${i}`);
      c.socket.end();
    }
    assert.equal(cluster.sim.counters.portForward, 6, 'one refused tunnel, then five v4 WebSockets');
    assert.ok(cluster.sim.openSpdySessions <= sessions, 'no new SPDY session');
    assert.equal(auto.logs.filter((l) => /does not offer the SPDY port-forward tunnel/.test(String(l.msg))).length, 1);
    // Forced spdy against the same server: the cluster cannot carry it, which is not the target's fault.
    const { reply, socket } = await socks5Connect(proxy.socks!, 'db.shop', 5432);
    socket.destroy();
    assert.equal(reply, 0x01, 'general failure (the API server answered 400 in plain text: no tunnel)');
    await eventually(
      async () => proxy.logs.some((l) => /does not offer the SPDY port-forward tunnel: use --transport auto or websocket/.test(String(l.error ?? l.msg))),
      5000,
    );
  } finally {
    cluster.sim.setSpdyTunnel(true);
    await auto.stop();
  }
});

test('status shows per pod: transport, tunnels, streams', async () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-spdy-state-'));
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  try {
    const r = await runCli(
      ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'spdy', '--no-proxy-auth', '--json'],
      {
        env,
      },
    );
    assert.equal(r.code, 0, r.stderr);
    const { id, socks } = JSON.parse(r.stdout) as { id: string; socks: string };
    const c = await open('echo.data', 7000, socks);
    await echo(c, Buffer.from('x'));
    const status = await eventually(async () => {
      const s = await runCli(['status', id, '--json'], { env });
      const parsed = statusItem<{ transports?: Array<{ pod: string; transport: string; tunnels: number; streams: number }> }>(s.stdout);
      return parsed.transports?.length ? parsed : undefined;
    }, 5000);
    assert.deepEqual(status.transports, [{ pod: `data/${echoPod}`, transport: 'spdy', tunnels: 1, streams: 1 }]);
    const table = await runCli(['status'], { env });
    assert.match(table.stdout, new RegExp(`${id}: data/${echoPod} via spdy: 1 tunnel, 1 stream`));
    c.socket.end();
    assert.equal((await runCli(['disconnect', id], { env })).code, 0);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test('status after a reload that made the route anew still shows the tunnel its open stream keeps', async () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-spdy-state-'));
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  const kubeconfig = path.join(stateDir, 'kubeconfig');
  copyFileSync(cluster.kubeconfig, kubeconfig);
  try {
    const r = await runCli(['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'spdy', '--no-proxy-auth', '--json'], {
      env,
    });
    assert.equal(r.code, 0, r.stderr);
    const { id, socks } = JSON.parse(r.stdout) as { id: string; socks: string };
    const c = await open('echo.data', 7000, socks);
    await echo(c, Buffer.from('x'));
    // The same API server by another name: the route is made anew, the old one keeps its stream.
    writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace('https://127.0.0.1:', 'https://localhost:'));
    const reload = await runCli(['reload', id], { env });
    assert.equal(reload.code, 0, reload.stderr);
    const s = await runCli(['status', id, '--json'], { env });
    const item = statusItem<{ server: string; transports?: Array<{ pod: string; transport: string; tunnels: number; streams: number }> }>(s.stdout);
    assert.match(item.server, /localhost/, 'the route was made anew');
    assert.deepEqual(item.transports, [{ pod: `data/${echoPod}`, transport: 'spdy', tunnels: 1, streams: 1 }]);
    assert.equal((await echo(c, Buffer.from('y'))).toString(), 'y', 'the stream still flows on that tunnel');
    c.socket.end();
    assert.equal((await runCli(['disconnect', id], { env })).code, 0);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
});
