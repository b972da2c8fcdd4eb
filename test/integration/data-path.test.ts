// The real CLI against the simulated cluster, driven by real curl and socks-proxy-agent.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { SocksProxyAgent } from 'socks-proxy-agent';
import { startTestCluster, apiGet, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';
import { closedWithin, openStream } from '../helpers/streams.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const helloFrom = (body: string) => /hello from (\S+) \((\S+)\)/.exec(body)?.[1];

let cluster: TestCluster;
let proxy: ProxyProcess;
let socks: string;
let httpProxy: string;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--log-level',
    'debug',
  ]);
  socks = proxy.socks!;
  httpProxy = proxy.http!;
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await cluster?.close();
  assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

async function viaSocks(url: string): Promise<string> {
  const r = await curl(['--proxy', `socks5h://${socks}`, url]);
  assert.equal(r.code, 0, `curl ${url}: ${r.stderr}`);
  return r.stdout;
}

/** Echo round trip over a raw SOCKS5 stream: exactly `payload` comes back. */
async function echoThrough(host: string, port: number, payload: Buffer): Promise<Buffer> {
  const { reply, socket, rest } = await socks5Connect(socks, host, port);
  assert.equal(reply, 0, `SOCKS reply for ${host}:${port}`);
  const reader = new Reader(socket);
  socket.write(payload);
  const prefix = rest;
  const back = Buffer.concat([prefix, await reader.read(payload.length - prefix.length)]);
  socket.destroy();
  return back;
}

async function replyCode(host: string, port: number, atyp?: 'domain' | 'ipv4' | 'ipv6'): Promise<number> {
  const { reply, socket } = await socks5Connect(socks, host, port, { atyp });
  socket.destroy();
  return reply;
}

/** The proxy must still serve a normal request after whatever the previous test did to it. */
async function stillServing(): Promise<void> {
  assert.match(await viaSocks('http://web.shop:8080/'), /hello from web-/);
}

describe('reaching Services by every name form (curl, socks5h)', () => {
  for (const name of ['web', 'web.shop', 'web.shop.svc', 'web.shop.svc.cluster.local', 'web.shop.svc.cluster.local.']) {
    test(name, async () => {
      const body = await viaSocks(`http://${name}:8080/`);
      // Service port 8080 → named targetPort "http" = container port 8081.
      assert.match(body, /hello from web-\S+ \(shop\) port 8081/);
    });
  }

  test('cross-namespace names', async () => {
    assert.match(await viaSocks('http://hello.default:80/'), /\(default\)/);
    const payload = Buffer.from('ping across namespaces\n');
    assert.deepEqual(await echoThrough('echo.data.svc.cluster.local', 7000, payload), payload);
  });

  test('SOCKS4a (curl --proxy socks4a://) and SOCKS4 with an IP', async () => {
    const r = await curl(['--proxy', `socks4a://${socks}`, 'http://web.shop.svc:8080/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
    const svc = await apiGet(cluster.sim, '/api/v1/namespaces/shop/services/api');
    const v4 = await curl(['--proxy', `socks4://${socks}`, `http://${svc.spec.clusterIP}:80/`]);
    assert.equal(v4.code, 0, v4.stderr);
    assert.match(v4.stdout, /hello from api-/);
  });

  test('numeric targetPort (api: 80 → 8080)', async () => {
    assert.match(await viaSocks('http://api.shop/'), /hello from api-\S+ \(shop\) port 8080/);
  });
});

describe('IP destinations', () => {
  test('a Service ClusterIP reaches that Service', async () => {
    const svc = await apiGet(cluster.sim, '/api/v1/namespaces/shop/services/web');
    const body = await viaSocks(`http://${svc.spec.clusterIP}:8080/`);
    assert.match(body, /hello from web-/);
    assert.equal(await replyCode(svc.spec.clusterIP, 8080, 'ipv4'), 0);
  });

  test('an IPv6 ClusterIP (dual-stack Service, SOCKS5 ATYP 4) reaches that Service', async () => {
    // fd00::/8 is only data in the simulated API: nothing is ever dialled there.
    await cluster.sim.createService({
      namespace: 'shop',
      name: 'web6',
      selector: { app: 'web' },
      ports: [{ port: 8080, targetPort: 'http' }],
      ipv6ClusterIP: 'fd00:10:96::a6',
    });
    const svc = await apiGet(cluster.sim, '/api/v1/namespaces/shop/services/web6');
    assert.ok(svc.spec.clusterIPs.includes('fd00:10:96::a6'));
    const reply = await eventually(async () => {
      const r = await socks5Connect(socks, 'fd00:10:96:0:0:0:0:a6', 8080, { atyp: 'ipv6' });
      r.socket.destroy();
      return r.reply === 0 ? 'ok' : undefined;
    });
    assert.equal(reply, 'ok');
  });

  test("a dual-stack pod's second address (only its Service's IPv6 EndpointSlice lists it) reaches that pod, in any spelling", async () => {
    // The field selector status.podIP matches a pod's first address only, as upstream's does.
    await cluster.sim.createPod({
      namespace: 'shop',
      name: 'dual-0',
      labels: { app: 'dual' },
      ipv6: 'fd00:10:244::d0',
      ports: [{ containerPort: 8090, backend: 'http' }],
    });
    await cluster.sim.createService({
      namespace: 'shop',
      name: 'dual',
      selector: { app: 'dual' },
      ports: [{ port: 80, targetPort: 8090 }],
      ipv6ClusterIP: 'fd00:10:96::d1',
    });
    for (const url of ['http://[fd00:10:244::d0]:8090/', 'http://[FD00:10:244:0:0::D0]:8090/', 'http://fd00-10-244--d0.shop.pod.cluster.local:8090/']) {
      const body = await eventually(async () => {
        const r = await curl(['--proxy', `socks5h://${socks}`, url]);
        return r.code === 0 ? r.stdout : undefined;
      });
      assert.equal(helloFrom(body), 'dual-0', url);
    }
    const r = await curl(['-x', `http://${httpProxy}`, 'http://[fd00:10:244::d0]:8090/']);
    assert.equal(helloFrom(r.stdout), 'dual-0', r.stderr);
    assert.equal(await replyCode('fd00:10:244::d0', 8090, 'ipv6'), 0);
  });

  test('a dual-stack pod behind no Service is reached at its second address by its dashed name (one list of that namespace, bounded)', async () => {
    await cluster.sim.createPod({
      namespace: 'shop',
      name: 'lone-0',
      labels: { app: 'lone' },
      ipv6: 'fd00:10:244::e0',
      ports: [{ containerPort: 8090, backend: 'http' }],
    });
    const body = await eventually(async () => {
      const r = await curl(['--proxy', `socks5h://${socks}`, 'http://fd00-10-244--e0.shop.pod.cluster.local:8090/']);
      return r.code === 0 ? r.stdout : undefined;
    });
    assert.equal(helloFrom(body), 'lone-0');
    // A burst of unknown addresses: each costs a bounded number of namespace look-ups, never a cluster-wide list.
    const before = { ...cluster.sim.counters.byPath };
    const started = Date.now();
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => replyCode(`fd00-10-244--${(0x100 + i).toString(16)}.shop.pod.cluster.local`, 80)));
    const seconds = Math.ceil((Date.now() - started) / 1000);
    assert.ok(
      replies.every((r) => r !== 0),
      String(replies),
    );
    const delta = (path: string) => (cluster.sim.counters.byPath[path] ?? 0) - (before[path] ?? 0);
    assert.equal(delta('/api/v1/pods'), 0, JSON.stringify(cluster.sim.counters.byPath));
    // The look-up budget (20 at once, 10/s) bounds the requests, a field-selector one and a list per name.
    const lists = delta('/api/v1/namespaces/shop/pods');
    assert.ok(lists >= 1 && lists <= 20 + 10 * seconds, `${lists} pod requests in ${seconds} s for 40 unknown names`);
    // The budget refills before the next test looks a pod up.
    const web = (await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods')).items.find((p: any) => p.metadata.name.startsWith('web-'));
    await eventually(async () => ((await replyCode(web.status.podIP, 8081)) === 0 ? true : undefined));
  });

  test('a Pod IP reaches exactly that pod, port unchanged', async () => {
    const pods = await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods');
    const web = pods.items.find((p: any) => p.metadata.name.startsWith('web-'));
    const body = await viaSocks(`http://${web.status.podIP}:8081/`);
    assert.equal(helloFrom(body), web.metadata.name);
    assert.match(body, /port 8081/);
  });

  // Short forms too, as a pod's search path completes them (the StatefulSet tutorials' mysql-0.mysql).
  for (const host of ['db-0.db.shop.svc.cluster.local', 'db-0.db.shop', 'db-0.db']) {
    test(`a headless pod hostname reaches that pod (server speaks first): ${host}`, async () => {
      const { reply, socket, rest } = await socks5Connect(socks, host, 5432);
      assert.equal(reply, 0);
      // The banner may arrive in the same segment as the SOCKS reply.
      const want = 'banner db-0\n'.length;
      const line = Buffer.concat([rest, await new Reader(socket).read(Math.max(0, want - rest.length))]);
      assert.equal(line.toString(), 'banner db-0\n');
      socket.destroy();
    });
  }
});

describe('payloads and concurrency', () => {
  test('1 MiB of random bytes echoes back byte for byte', async () => {
    const payload = randomBytes(1 << 20);
    assert.equal(sha(await echoThrough('echo.data', 7000, payload)), sha(payload));
  });

  test('socks-proxy-agent: POST 1 MiB to /echo, same sha256 back', async () => {
    const payload = randomBytes(1 << 20);
    const agent = new SocksProxyAgent(`socks5h://${socks}`);
    const body = await new Promise<Buffer>((resolve, reject) => {
      const req = http.request('http://web.shop.svc.cluster.local:8080/echo', { method: 'POST', agent }, (res) => {
        const chunks: Buffer[] = [];
        res
          .on('data', (c: Buffer) => chunks.push(c))
          .on('end', () => resolve(Buffer.concat(chunks)))
          .on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
    assert.equal(sha(body), sha(payload));
  });

  test('100 concurrent streams all arrive intact', async () => {
    const results = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const payload = randomBytes(8192 + Math.floor(Math.random() * 8192));
        return sha(await echoThrough('echo.data', 7000, payload)) === sha(payload);
      }),
    );
    assert.equal(results.filter(Boolean).length, 100);
  });

  test('connections spread over at least two pods', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 9; i++) seen.add(helloFrom(await viaSocks('http://web.shop:8080/'))!);
    assert.ok(seen.size >= 2, `only reached ${[...seen].join(', ')}`);
  });
});

describe('Kubernetes e2e port-forward cases', () => {
  test('a client that connects, sends nothing and disconnects', async () => {
    const { reply, socket } = await socks5Connect(socks, 'echo.data', 7000);
    assert.equal(reply, 0);
    socket.end();
    await new Promise((r) => socket.once('close', r));
    await stillServing();
  });

  test('a client that sends data and disconnects', async () => {
    const { reply, socket } = await socks5Connect(socks, 'echo.data', 7000);
    assert.equal(reply, 0);
    socket.end(randomBytes(4096));
    socket.resume();
    await new Promise((r) => socket.once('close', r));
    await stillServing();
  });

  test('bytes pipelined right after the SOCKS request are not lost', async () => {
    const { reply, socket, rest } = await socks5Connect(socks, 'echo.data', 7000, { pipelined: Buffer.from('early bytes\n') });
    assert.equal(reply, 0);
    const got = Buffer.concat([rest, await new Reader(socket).read(12 - rest.length)]);
    assert.equal(got.toString(), 'early bytes\n');
    socket.destroy();
  });
});

describe('HTTP proxy front end', () => {
  test('absolute-form GET is forwarded in origin form without hop-by-hop headers', async () => {
    const r = await curl(['-x', `http://${httpProxy}`, '-H', 'Proxy-Connection: keep-alive', 'http://web.shop:8080/whoami?x=1']);
    assert.equal(r.code, 0, r.stderr);
    const who = JSON.parse(r.stdout);
    assert.equal(who.path, '/whoami?x=1');
    assert.equal(who.method, 'GET');
    assert.equal(who.headers['proxy-connection'], undefined);
    assert.equal(who.headers.host, 'web.shop:8080');
  });

  test('keep-alive: two requests on one client connection', async () => {
    const r = await curl(['-x', `http://${httpProxy}`, '-v', 'http://web.shop:8080/', 'http://api.shop:80/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-[\s\S]*hello from api-/);
    assert.match(r.stderr, /Re-using existing connection|Reusing existing/i);
  });

  test('CONNECT tunnels raw bytes (curl -p)', async () => {
    const r = await curl(['-p', '-x', `http://${httpProxy}`, 'http://web.shop.svc.cluster.local:8080/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
  });

  test('failures map to HTTP statuses with a text body', async () => {
    const status = async (url: string) => {
      const r = await curl(['-x', `http://${httpProxy}`, '-o', '-', '-w', '\n%{http_code}', url]);
      const lines = r.stdout.trimEnd().split('\n');
      return { code: Number(lines.pop()), body: lines.join('\n') };
    };
    const unknown = await status('http://nope.shop.svc.cluster.local:80/');
    assert.equal(unknown.code, 502);
    assert.match(unknown.body, /nope/);
    assert.equal((await status('http://www.example.com/')).code, 403);
    assert.equal((await status('http://external.shop/')).code, 502);
  });
});

describe('failures tell the truth (SOCKS5 reply codes) and the proxy keeps serving', () => {
  test('unknown name or Service → 0x04', async () => {
    assert.equal(await replyCode('nope.shop.svc.cluster.local', 80), 0x04);
    assert.equal(await replyCode('nope', 80), 0x04);
    await stillServing();
  });

  test('no ready endpoint → 0x04', async () => {
    await cluster.sim.createService({ namespace: 'shop', name: 'idle', selector: { app: 'nobody' }, ports: [{ port: 80 }] });
    await eventually(async () => (await replyCode('idle.shop', 80)) === 0x04);
    await stillServing();
  });

  test('pod refused the port → 0x05', async () => {
    const pods = await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods');
    const web = pods.items.find((p: any) => p.metadata.name.startsWith('web-'));
    assert.equal(await replyCode(web.status.podIP, 9, 'ipv4'), 0x05);
    await stillServing();
  });

  test('name outside the cluster → 0x02; unknown IP → 0x02', async () => {
    assert.equal(await replyCode('www.example.com', 443), 0x02);
    assert.equal(await replyCode('example.com', 443), 0x02);
    assert.equal(await replyCode('127.250.0.1', 80, 'ipv4'), 0x02);
    await stillServing();
  });

  test('ExternalName Service → 0x04 with a clear log line', async () => {
    assert.equal(await replyCode('external.shop', 80), 0x04);
    await eventually(async () => proxy.logs.some((l) => String(l.msg).includes('ExternalName')));
    await stillServing();
  });
});

describe('the cluster changes under the proxy', () => {
  test('a deleted pod is never chosen again; a new pod is used within seconds', async () => {
    const pods = await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods');
    const victim = pods.items.find((p: any) => p.metadata.name.startsWith('web-')).metadata.name;
    await cluster.sim.deletePod('shop', victim);
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 8; i++) assert.notEqual(helloFrom(await viaSocks('http://web.shop:8080/')), victim);
    await cluster.sim.createPod({ namespace: 'shop', name: 'web-fresh', labels: { app: 'web' }, ports: [{ name: 'http', containerPort: 8080 }] });
    await eventually(async () => helloFrom(await viaSocks('http://web.shop:8080/')) === 'web-fresh', 10_000, 50);
  });

  test('no API request per connection once warm, apart from the port-forward', async () => {
    await viaSocks('http://web.shop:8080/');
    cluster.sim.resetCounters();
    for (let i = 0; i < 20; i++) await viaSocks('http://web.shop:8080/');
    const c = cluster.sim.counters;
    if (testTransport() === 'websocket') {
      // One WebSocket per stream: one upgrade per connection, no more.
      assert.equal(c.portForward, 20, `port-forward upgrades: ${c.portForward}`);
    } else {
      // One SPDY tunnel per pod (three web pods), opened once and reused by every later connection.
      assert.ok(c.portForward <= 3, `port-forward upgrades: ${c.portForward}`);
    }
    // Watches renew themselves every minute or two (cluster/informer.ts): background, not per connection.
    assert.equal(c.total - c.portForward - c.watch, 0, `unexpected API requests: ${JSON.stringify(c.byPath)}`);
    assert.ok(c.watch <= 4, `watch renewals: ${c.watch}`);
  });

  test('API server restart: open streams end (no hang); a Service created after it is reachable; API down → 0x04', async () => {
    // Every tunnel runs through the API server, so its restart ends them; clients must see that.
    const open = await openStream(socks, 'echo.data', 7000);
    // Down until the proxy has been seen failing without it.
    let bringUp!: () => void;
    const restarted = cluster.sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
    try {
      await closedWithin(open.socket, 10_000, 'a stream open across the API server restart');
      await new Promise((r) => setTimeout(r, 300));
      // The dial fails (0x01) until the route knows its API server does not answer
      // (routes/guest-cluster/health.ts, within a second or two of the failure); then host unreachable, at once.
      assert.ok([0x01, 0x04].includes(await replyCode('web.shop', 8080)), 'API unreachable → a failure');
      await eventually(async () => (await replyCode('web.shop', 8080)) === 0x04, 5_000, 200);
    } finally {
      bringUp();
    }
    await restarted;
    await cluster.sim.createPod({ namespace: 'shop', name: 'late-1', labels: { app: 'late' }, ports: [{ name: 'http', containerPort: 8080 }] });
    await cluster.sim.createService({ namespace: 'shop', name: 'late', selector: { app: 'late' }, ports: [{ port: 80, targetPort: 8080 }] });
    const body = await eventually(
      async () => {
        const r = await curl(['--proxy', `socks5h://${socks}`, 'http://late.shop/']);
        return r.code === 0 && r.stdout;
      },
      20_000,
      250,
    );
    assert.match(body, /hello from late-1/);
    assert.ok(
      proxy.logs.some((l) => l.msg === 'watch recovered'),
      'the proxy logs that its watches recovered',
    );
  });
});
