// No open relay: only what the cluster resolves gets a stream. Names outside the cluster, random
// and loopback IPs, IPv6 literals and names under the cluster domain that do not exist are asked
// for through SOCKS5, SOCKS4(a), HTTP CONNECT and absolute-form; every one is refused, a canary
// server on 127.0.0.1 never sees a connection, and the API server sees no port-forward.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { Reader, socks5Connect, splitHostPort } from '../helpers/socks-client.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let canary: net.Server;
let canaryPort: number;
let canaryHits = 0;

before(async () => {
  cluster = await startTestCluster();
  canary = net.createServer((s) => {
    canaryHits++;
    s.destroy();
  });
  canary.listen(0, '127.0.0.1');
  await once(canary, 'listening');
  canaryPort = (canary.address() as net.AddressInfo).port;
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  canary?.close();
  await cluster?.close();
});

/** Deterministic "random" public-looking IPv4s (first octet 1–126: never loopback, never the sim's). */
function randomIps(n: number, seed = 0x5eed): string[] {
  let x = seed;
  const next = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
  return Array.from({ length: n }, () => [1 + (next() % 126), next(), next(), 1 + (next() % 254)].join('.'));
}

type Kind = 'outside' | 'unknown';
interface Case {
  host: string;
  port: number;
  kind: Kind;
}

function cases(): Case[] {
  const outside: Array<[string, number]> = [
    // localhost is never a short Service name (RFC 6761 reserves it for this machine).
    ['localhost', canaryPort],
    ['example.com', 80],
    ['www.google.com', 443],
    ['kubernetes.io', 443],
    ['canary.localhost', canaryPort],
    ['web.shop.example.com', 8080],
    ['web.shop.svc.cluster.local.evil.com', 8080],
    ['127.0.0.1', canaryPort],
    ['10.0.0.1', 80],
    ['169.254.169.254', 80],
    ['8.8.8.8', 53],
    ...randomIps(4).map((ip): [string, number] => [ip, 80]),
    ['::1', canaryPort],
    ['2001:db8::1', 443],
    ['fe80::1', 80],
    ['::ffff:127.0.0.1', canaryPort],
    ['::', 80],
  ];
  const unknown: Array<[string, number]> = [
    ['nope.shop.svc.cluster.local', 80],
    ['web.nope.svc.cluster.local', 8080],
    ['a.b.c.d.svc.cluster.local', 80],
    ['1-2-3-4.shop.pod.cluster.local', 80],
    ['nope.svc', 80],
    ['x.cluster.local', 80],
    ['db-9.db.shop.svc.cluster.local', 5432],
  ];
  return [
    ...outside.map(([host, port]) => ({ host, port, kind: 'outside' as const })),
    ...unknown.map(([host, port]) => ({ host, port, kind: 'unknown' as const })),
  ];
}

const expected = { outside: { socks5: 0x02, http: 403 }, unknown: { socks5: 0x04, http: 502 } };
const authority = (host: string, port: number) => (net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`);

async function raw(address: string, request: Buffer, n: number): Promise<Buffer> {
  const [host, port] = splitHostPort(address);
  const s = net.connect(port, host);
  s.on('error', () => undefined);
  await once(s, 'connect');
  const reader = new Reader(s);
  s.write(request);
  try {
    return await reader.read(n, 10_000);
  } finally {
    s.destroy();
  }
}

async function socks5Reply(c: Case): Promise<number> {
  const atyp = net.isIPv4(c.host) ? 'ipv4' : net.isIPv6(c.host) ? 'ipv6' : 'domain';
  const { reply, socket } = await socks5Connect(proxy.socks!, c.host, c.port, { atyp });
  socket.destroy();
  return reply;
}

/** SOCKS4 for IPv4 literals, SOCKS4a (0.0.0.1 + name) for everything else. */
async function socks4Reply(c: Case): Promise<number> {
  const v4 = net.isIPv4(c.host);
  const ip = v4 ? c.host.split('.').map(Number) : [0, 0, 0, 1];
  const req = Buffer.concat([
    Buffer.from([4, 1, c.port >> 8, c.port & 0xff, ...ip]),
    Buffer.from('relay\0'),
    v4 ? Buffer.alloc(0) : Buffer.from(`${c.host}\0`),
  ]);
  return (await raw(proxy.socks!, req, 8))[1]!;
}

async function httpStatus(head: string): Promise<number> {
  const line = (await raw(proxy.http!, Buffer.from(head), 12)).toString('latin1');
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(line)?.[1]);
}

test('nothing outside what the cluster resolves gets a stream, on any front end', async () => {
  const before = cluster.sim.counters.portForward;
  const wrong: string[] = [];
  for (const c of cases()) {
    const want = expected[c.kind];
    const a = authority(c.host, c.port);
    const got = {
      socks5: await socks5Reply(c),
      socks4: await socks4Reply(c),
      connect: await httpStatus(`CONNECT ${a} HTTP/1.1\r\nHost: ${a}\r\n\r\n`),
      forward: await httpStatus(`GET http://${a}/ HTTP/1.1\r\nHost: ${a}\r\n\r\n`),
    };
    const ok = got.socks5 === want.socks5 && got.socks4 === 0x5b && got.connect === want.http && got.forward === want.http;
    if (!ok) wrong.push(`${a} (${c.kind}): ${JSON.stringify(got)}`);
  }
  assert.deepEqual(wrong, [], 'every request refused with the documented code');
  assert.equal(canaryHits, 0, 'the proxy never dialled anything itself');
  assert.equal(cluster.sim.counters.portForward, before, 'no port-forward was even attempted');
  assert.ok(!proxy.logs.some((l) => l.msg === 'stream open'), 'no stream was opened');
});

test('a Host header alone never routes: origin-form requests are not proxied', async () => {
  assert.equal(await httpStatus(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${canaryPort}\r\n\r\n`), 400);
  assert.equal(await httpStatus(`GET http://web.shop:8080/ HTTP/1.1\r\nHost: 127.0.0.1:${canaryPort}\r\n\r\n`), 200);
  assert.equal(canaryHits, 0);
});

test('what the cluster does resolve still works on every front end', async () => {
  for (const args of [
    ['--proxy', `socks5h://${proxy.socks}`],
    ['--proxy', `socks4a://${proxy.socks}`],
    ['-x', `http://${proxy.http}`],
    ['-p', '-x', `http://${proxy.http}`],
  ]) {
    const r = await curl([...args, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stdout, /hello from web-/);
  }
});
