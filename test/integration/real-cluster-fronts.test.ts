// What stands in front of real API servers (test/helpers/api-front.ts before the real
// kube-apiserver): a Rancher-style path prefix under a certificate for another name
// (tls-server-name), a server URL with a trailing slash, proxy-url, a front that passes only
// WebSocket upgrades, one that cuts idle connections, one that gzips answers, one that refuses
// upgrades with an HTML page or sends everyone to its login page. Real kubectl port-forward goes
// through the same front for comparison. Skips with a reason when the real-cluster binaries are
// not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, pod, service } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { startApiFront, type ApiFront } from '../helpers/api-front.js';
import { startSocks5Relay, type UpstreamProxy } from '../helpers/upstream-proxies.js';
import { curl } from '../helpers/curl.js';

const skip = skipUnlessRealCluster();
const PREFIX = '/k8s/clusters/c-abc123';

const ECHO = pod({ name: 'echo', labels: { app: 'echo' }, containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] });
const WEB = pod({ name: 'web', containers: [httpContainer('web')] });

let cluster: RealCluster | undefined;
let front: ApiFront;
let relay: UpstreamProxy;
let kubeconfig = '';
let proxy: ProxyProcess | undefined;
const others: ProxyProcess[] = [];
let echoIP = '';
let webIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(ECHO, WEB) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', 'pod/web', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  const ipOf = async (name: string) => (await cluster!.get<{ status: { podIP: string } }>(`/api/v1/namespaces/shop/pods/${name}`)).status.podIP;
  [echoIP, webIP] = await Promise.all([ipOf('echo'), ipOf('web')]);
  const caPem = readFileSync(path.join(cluster.dir, 'pki', 'ca.crt'), 'utf8');
  front = await startApiFront({ upstream: cluster.server, upstreamCaPem: caPem, prefix: PREFIX, hostName: 'rancher.example' });
  relay = await startSocks5Relay(front.port);
  // The server URL ends in a slash; the certificate is for rancher.example, not 127.0.0.1.
  const frontCluster = (extra: string) =>
    `{server: "${front.url}/", certificate-authority-data: ${Buffer.from(front.caPem).toString('base64')}, tls-server-name: ${front.hostName}${extra}}`;
  kubeconfig = path.join(cluster.dir, 'front.kubeconfig');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: front, cluster: ${frontCluster('')}}, {name: via-socks, cluster: ${frontCluster(`, proxy-url: "${relay.url}"`)}}]`,
      `users: [{name: admin, user: {token: ${cluster.tokens.admin}}}]`,
      'contexts: [{name: front, context: {cluster: front, user: admin, namespace: shop}}, {name: via-socks, context: {cluster: via-socks, user: admin, namespace: shop}}]',
      'current-context: front',
      '',
    ].join('\n'),
  );
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--log-level', 'debug']);
});

after(async () => {
  for (const p of others) await p.stop();
  await relay?.close();
  await front?.close();
  const codes = await stopProxiesAndCluster(cluster, new Map(proxy ? [['front', proxy]] : []));
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** Opens a connection to the echo pod through `socks` (a proxy's SOCKS address) or a local port. */
async function echoConnection(via: { socks: string } | { port: number }, target = echoIP): Promise<(text: string) => Promise<string>> {
  let socket: net.Socket;
  const chunks: Buffer[] = [];
  if ('socks' in via) {
    const r = await socks5Connect(via.socks, target, 7000);
    assert.equal(r.reply, 0, 'SOCKS reply');
    socket = r.socket;
    chunks.push(r.rest);
  } else {
    socket = net.connect(via.port, '127.0.0.1');
    await once(socket, 'connect');
  }
  let ended = '';
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('end', () => (ended = 'EOF'));
  socket.on('error', (err) => (ended = err.message));
  socket.on('close', () => (ended ||= 'closed'));
  socket.resume();
  after(() => socket.destroy());
  return async (text) => {
    chunks.length = 0;
    socket.write(text);
    const t0 = Date.now();
    while (Buffer.concat(chunks).toString() !== text) {
      if (ended) return `connection ended (${ended})`;
      if (Date.now() - t0 > 10_000) return `no echo: ${JSON.stringify(Buffer.concat(chunks).toString())}`;
      await delay(10);
    }
    return text;
  };
}

/** Real kubectl port-forward to pod/echo through the front: the local port it listens on. */
async function kubectlPortForward(t: TestContext): Promise<number> {
  const pf: ChildProcess = spawn('kubectl', ['--kubeconfig', kubeconfig, 'port-forward', '--address', '127.0.0.1', 'pod/echo', ':7000'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => pf.kill());
  let out = '';
  pf.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  pf.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const t0 = Date.now();
  for (;;) {
    const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out);
    if (m) return Number(m[1]);
    if (Date.now() - t0 > 15_000 || pf.exitCode !== null) throw new Error(`kubectl port-forward: ${out}`);
    await delay(50);
  }
}

test('a path prefix, a trailing slash and tls-server-name: every request carries the prefix, as kubectl', { timeout: 60_000 }, async (t) => {
  if (skip) return t.skip(skip);
  // A front that passes WebSocket upgrades only (SPDY/3.1 refused): both are WebSockets here.
  front.behaviour.upgrades = 'websocket-only';
  t.after(() => (front.behaviour.upgrades = 'all'));
  const ours = await echoConnection({ socks: proxy!.socks! });
  assert.equal(await ours('through the front'), 'through the front');
  const kubectl = await echoConnection({ port: await kubectlPortForward(t) });
  assert.equal(await kubectl('kubectl too'), 'kubectl too');
  const v4 = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'websocket']);
  others.push(v4);
  assert.equal(await (await echoConnection({ socks: v4.socks! }))('per-stream WebSocket'), 'per-stream WebSocket');
  // doctor asks for each transport: the legacy SPDY upgrade gets the front's page, named as such.
  const doctor = await runCli(['doctor', '--kubeconfig', kubeconfig], { timeoutMs: 30_000 });
  assert.match(doctor.stdout, /per-stream WebSocket v4: yes; legacy SPDY: no \(HTTP 400: an HTML page "400 Bad Request" \(not the API server/);
  const strays = front.seen.filter((s) => !s.path.startsWith(`${PREFIX}/`) || s.path.startsWith(`${PREFIX}//`));
  assert.deepEqual(strays, [], 'every request names the prefix once');
  const names = new Set(front.seen.map((s) => s.sni));
  assert.deepEqual([...names], [front.hostName], 'every TLS handshake names tls-server-name (SNI), as kubectl');
  assert.ok(front.seen.filter((s) => s.upgrade === 'websocket').length >= 3, 'the upgrades went through the front');
});

test('proxy-url socks5 before the front: API requests and the upgrade go through it', { timeout: 60_000 }, async (t) => {
  if (skip) return t.skip(skip);
  const before = relay.connections;
  const viaSocks = await startProxyProcess(['--kubeconfig', kubeconfig, '--context', 'via-socks', '--listen-socks', '127.0.0.1:0']);
  others.push(viaSocks);
  const afterStart = relay.connections;
  assert.ok(afterStart > before, 'the API requests went through the proxy-url');
  assert.equal(await (await echoConnection({ socks: viaSocks.socks! }))('via socks5'), 'via socks5');
  assert.ok(relay.connections > afterStart, 'the port-forward upgrade went through the proxy-url');
  assert.deepEqual([...new Set(front.seen.map((s) => s.sni))], [front.hostName], 'SNI through the proxy-url too');
});

test('a front that resets connections idle 12 s (a load balancer): an idle stream stays up, as with kubectl', { timeout: 60_000 }, async (t) => {
  if (skip) return t.skip(skip);
  // kubeadm's HAProxy example cuts TCP connections idle 20 s; client-go pings its tunnel every 10 s.
  // Cut with a RST, as a balancer that forgot the flow answers the next packet.
  front.behaviour.idleMs = 12_000;
  front.behaviour.idle = 'rst';
  t.after(() => {
    front.behaviour.idleMs = 0;
    front.behaviour.idle = 'fin';
  });
  const cutBefore = front.cut;
  const logsBefore = proxy!.logs.length;
  const kubectl = await echoConnection({ port: await kubectlPortForward(t) });
  const ours = await echoConnection({ socks: proxy!.socks! });
  assert.equal(await kubectl('a'), 'a');
  assert.equal(await ours('a'), 'a');
  await delay(15_000);
  assert.ok(front.cut > cutBefore, 'the front cut idle connections (watches between their events)');
  assert.equal(await kubectl('b'), 'b', 'kubectl port-forward kept its stream');
  assert.equal(await ours('b'), 'b', 'the proxy kept its stream');
  assert.equal(await (await echoConnection({ socks: proxy!.socks! }))('c'), 'c', 'a new stream opens at once');
  const warnings = proxy!.logs.slice(logsBefore).filter((l) => Number(l.level) >= 40);
  assert.deepEqual(warnings, [], 'cut watches are resumed at once, without a warning or a degraded route');
});

test('a front that gzips answers nobody asked to be gzipped: the proxy starts and follows changes, as kubectl', { timeout: 60_000 }, async (t) => {
  if (skip) return t.skip(skip);
  front.behaviour.gzip = true;
  t.after(() => (front.behaviour.gzip = false));
  const listed = await runKubectlThroughFront(['get', 'pods', '-o', 'name']);
  assert.match(listed, /pod\/echo/, 'kubectl reads the gzipped list');
  const gz = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
  others.push(gz);
  // A Service made after the sync reaches the proxy only through the (gzipped) watches.
  await cluster!.kubectl(['apply', '-f', '-'], { input: manifests(service('gz', { namespace: 'shop', selector: { app: 'echo' }, ports: [{ port: 7000 }] })) });
  const t0 = Date.now();
  let answer = '';
  while (Date.now() - t0 < 15_000) {
    const r = await socks5Connect(gz.socks!, 'gz.shop', 7000);
    r.socket.destroy();
    if (r.reply === 0) {
      answer = await (await echoConnection({ socks: gz.socks! }, 'gz.shop'))('gzip');
      break;
    }
    await delay(200);
  }
  assert.equal(answer, 'gzip');
  // Streams asked for before the Service's endpoints were in say so; the watches must not warn.
  const warnings = gz.logs.filter((l) => Number(l.level) >= 40 && !String(l.msg).startsWith('stream failed'));
  assert.deepEqual(
    warnings.map((l) => l.msg),
    [],
    'no warning',
  );
});

test('a front that refuses upgrades with an HTML page, drops them, or sends everyone to its login page: said so', { timeout: 60_000 }, async (t) => {
  if (skip) return t.skip(skip);
  front.behaviour.upgrades = 'none';
  front.behaviour.refuseStatus = 403;
  t.after(() => {
    front.behaviour.upgrades = 'all';
    front.behaviour.loginRedirect = undefined;
  });
  const refused = await curl(['-s', '-x', `http://${proxy!.http}`, `http://${webIP}:8080/`]);
  assert.match(
    refused.stdout,
    /refused \(403\): an HTML page "403 Forbidden" \(not the API server: a proxy, load balancer or sign-in page in front of it answered\)/,
  );
  assert.doesNotMatch(refused.stdout, /pods\/portforward|DOCTYPE/, "no RBAC advice for a front's page");
  // A front that does not know upgrades drops the headers; the API server answers the bare GET.
  front.behaviour.upgrades = 'strip';
  // The pod's 403 is remembered a few seconds (negotiate.ts): asked again until the new answer shows.
  const droppedText = /without its Upgrade header \(400 Upgrade request required\): a proxy, ingress or load balancer in front of it drops it/;
  let stripped = '';
  for (const deadline = Date.now() + 20_000; !droppedText.test(stripped) && Date.now() < deadline; await delay(500)) {
    stripped = (await curl(['-s', '-x', `http://${proxy!.http}`, `http://${webIP}:8080/`])).stdout;
  }
  assert.match(stripped, droppedText);
  front.behaviour.loginRedirect = 'https://login.example/sso?session=s3cr3t';
  const r = await runCli(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0'], { timeoutMs: 20_000 });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /answered 302: a redirect to https:\/\/login\.example\/sso \(not the API server/);
  assert.doesNotMatch(r.stderr, /s3cr3t/);
});

/** Real kubectl through the front (context front); its stdout. */
async function runKubectlThroughFront(args: string[]): Promise<string> {
  const k = spawn('kubectl', ['--kubeconfig', kubeconfig, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  k.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  k.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  await once(k, 'exit');
  return out;
}
