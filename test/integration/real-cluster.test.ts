// The real CLI against a real control plane (test/helpers/real-cluster.ts: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler v1.37.2, a node stand-in serving the upstream CRI
// streaming port-forward), driven by real kubectl and real curl. One cluster for the file; a
// proxy per transport. Skips with a reason when the test bed is not built (fails instead under
// PROXYOUT_REQUIRE_REAL_CLUSTER=1, as CI sets it).
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import yaml from 'js-yaml';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import {
  bulkContainer,
  deployment,
  httpContainer,
  manifests,
  multiContainers,
  multiService,
  namespace,
  pod,
  service,
  statefulSet,
  webDeployment,
  webService,
} from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, endpointSliceReadyMs, startClusterLogged, startProxies, stopProxiesAndCluster, webAddresses } from '../helpers/real-cluster-setup.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { eventually } from '../helpers/cluster.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

/** What proxyout/bulk sends per connection: several times the SPDY and WebSocket flow-control windows. */
const BULK_BYTES = 8 << 20;

const MANIFESTS = manifests(
  namespace('other'),
  // Outside what the limited user may read.
  service('web', { namespace: 'other', ports: [{ port: 80, targetPort: 8080 }] }),
  webDeployment(2),
  webService(),
  // The web pods (a Deployment: no hostnames) behind a headless Service.
  service('web-headless', { clusterIP: 'None', selector: { app: 'web' }, ports: [{ name: 'http', port: 8080 }] }),
  statefulSet({ name: 'db', replicas: 2, serviceName: 'db-headless', containers: [httpContainer('db')] }),
  service('db-headless', { clusterIP: 'None', selector: { app: 'db' }, ports: [{ name: 'http', port: 8080 }] }),
  // Two Deployments behind one Service whose named targetPort is another number in each.
  ...(['a', 'b'] as const).map((variant, i) =>
    deployment({ name: `named-${variant}`, replicas: 1, labels: { app: 'named', variant }, containers: [httpContainer('app', 8081 + i, 'app')] }),
  ),
  service('named', { ports: [{ port: 80, targetPort: 'app' }] }),
  deployment({ name: 'multi', replicas: 1, containers: multiContainers('http') }),
  multiService(),
  deployment({ name: 'bulk', replicas: 1, containers: [bulkContainer('bulk', BULK_BYTES, 9100, 'bulk')] }),
  service('bulk', { ports: [{ port: 9100, targetPort: 'bulk' }] }),
  deployment({
    name: 'roll',
    replicas: 2,
    strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    // A preStop sleep, as zero-downtime rollouts use: the pod keeps serving a second after its deletion.
    annotations: { 'proxyout.test/stop-delay': '1s' },
    containers: [httpContainer('web')],
  }),
  service('roll', { ports: [{ port: 80, targetPort: 'http' }] }),
  // Three pods behind a Service with ClientIP session affinity, and behind one without.
  deployment({ name: 'sticky', replicas: 3, containers: [httpContainer('web')] }),
  service('sticky', { ports: [{ port: 80, targetPort: 'http' }], sessionAffinity: 'ClientIP' }),
  service('spread', { selector: { app: 'sticky' }, ports: [{ port: 80, targetPort: 'http' }] }),
  // Running, never ready: its Service has an endpoint, none of them ready.
  deployment({ name: 'unready', replicas: 1, annotations: { 'proxyout.test/ready': 'false' }, containers: [httpContainer('web', 8080, null)] }),
  service('unready', { ports: [{ port: 80, targetPort: 8080 }] }),
);

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let webClusterIP = '';
let webPodIP = '';
let webPodName = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  const workloads = ['web', 'named-a', 'named-b', 'multi', 'bulk', 'roll', 'sticky'].map((d) => `deployment/${d}`);
  await applyAndRollOut(cluster, MANIFESTS, [...workloads, 'statefulset/db']);
  ({ clusterIP: webClusterIP, podName: webPodName, podIP: webPodIP } = await webAddresses(cluster));
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

function proxy(t: Transport): ProxyProcess {
  return proxies.get(t)!;
}

async function viaSocks(t: Transport, url: string): Promise<string> {
  const r = await curl(['--proxy', `socks5h://${proxy(t).socks}`, url]);
  assert.equal(r.code, 0, `curl socks5h ${url}: ${r.stderr}\n${cluster?.logTail('kube-apiserver', 5)}`);
  return r.stdout;
}

async function viaConnect(t: Transport, url: string): Promise<string> {
  const r = await curl(['-p', '-x', `http://${proxy(t).http}`, url]);
  assert.equal(r.code, 0, `curl CONNECT ${url}: ${r.stderr}`);
  return r.stdout;
}

async function viaAbsoluteForm(t: Transport, url: string): Promise<string> {
  const r = await curl(['-x', `http://${proxy(t).http}`, url]);
  assert.equal(r.code, 0, `curl absolute-form ${url}: ${r.stderr}`);
  return r.stdout;
}

/** The HTTP status of an absolute-form request through the HTTP listener. */
async function httpStatus(t: Transport, url: string): Promise<number> {
  const r = await curl(['-x', `http://${proxy(t).http}`, '-o', '/dev/null', '-w', '%{http_code}', url]);
  return Number(r.stdout);
}

/** The HTTP status a CONNECT gets (curl reports it as %{http_connect}). */
async function connectStatus(t: Transport, host: string, port: number): Promise<number> {
  const r = await curl(['-p', '-x', `http://${proxy(t).http}`, '-o', '/dev/null', '-w', '%{http_connect}', `http://${host}:${port}/`]);
  return Number(r.stdout);
}

async function socksReply(t: Transport, host: string, port: number): Promise<number> {
  const { reply, socket } = await socks5Connect(proxy(t).socks!, host, port);
  socket.destroy();
  return reply;
}

const servedBy = (body: string) => /^pod=(\S+) namespace=(\S+) port=(\d+)$/m.exec(body);

for (const transport of TRANSPORTS) {
  describe(`real cluster, --transport ${transport}`, { skip }, () => {
    describe('destination forms (socks5h)', () => {
      for (const name of ['web', 'web.shop', 'web.shop.svc', 'web.shop.svc.cluster.local']) {
        test(name, async () => {
          const m = servedBy(await viaSocks(transport, `http://${name}/`));
          assert.ok(m, 'answered by a pod');
          assert.match(m[1], /^web-[a-z0-9]+-[a-z0-9]+$/);
          assert.equal(m[2], 'shop');
          assert.equal(m[3], '8080', 'Service port 80 → named targetPort http = 8080');
        });
      }

      test('the Service ClusterIP', async () => {
        assert.match(await viaSocks(transport, `http://${webClusterIP}/`), /^pod=web-\S+ namespace=shop port=8080$/m);
      });

      test('a Pod IP (port unchanged)', async () => {
        assert.equal(servedBy(await viaSocks(transport, `http://${webPodIP}:8080/`))?.[1], webPodName);
      });

      test('a Pod IP of a pod being deleted, while it still serves (a preStop sleep)', async () => {
        const name = `lingering-${transport}`;
        // The grace period outlasts the stop delay: the pod serves its IP 30 s after the delete.
        const spec = { terminationGracePeriodSeconds: 60 };
        const lingering = pod({ name, namespace: 'shop', annotations: { 'proxyout.test/stop-delay': '30s' }, containers: [httpContainer('web')], spec });
        await cluster!.kubectl(['apply', '-f', '-'], { input: manifests(lingering) });
        await cluster!.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', `pod/${name}`, '--timeout=30s']);
        const ip = (await cluster!.kubectl(['-n', 'shop', 'get', 'pod', name, '-o', 'jsonpath={.status.podIP}'])).stdout.trim();
        await cluster!.kubectl(['-n', 'shop', 'delete', 'pod', name, '--wait=false']);
        // The proxy has seen the deletion (a pod watch hears it at once; a look-up is the first one).
        await delay(1_000);
        assert.equal(servedBy(await viaSocks(transport, `http://${ip}:8080/`))?.[1], name);
      });

      test('a headless Service pod name', async () => {
        for (const pod of ['db-0', 'db-1']) {
          assert.equal(servedBy(await viaSocks(transport, `http://${pod}.db-headless.shop.svc.cluster.local:8080/`))?.[1], pod);
        }
      });

      test("a Service's endpoint without a hostname, by its address dashed (CoreDNS), headless or not", async () => {
        const dashed = webPodIP.replace(/\./g, '-');
        assert.equal(servedBy(await viaSocks(transport, `http://${dashed}.web-headless.shop.svc.cluster.local:8080/`))?.[1], webPodName);
        // CoreDNS answers endpoint names under a Service with a ClusterIP too: the pod, port as asked.
        assert.equal(servedBy(await viaSocks(transport, `http://${dashed}.web.shop.svc.cluster.local:8080/`))?.[1], webPodName);
        // An address that is no endpoint of the Service is no name.
        assert.equal(await socksReply(transport, `10-244-250-250.web.shop.svc.cluster.local`, 8080), 0x04);
      });

      test('a named targetPort that is another number in each pod', async () => {
        const seen = new Set<string>();
        for (let i = 0; i < 8; i++) {
          const m = servedBy(await viaSocks(transport, 'http://named.shop/'));
          assert.ok(m);
          const want = m[1].startsWith('named-a-') ? '8081' : m[1].startsWith('named-b-') ? '8082' : '?';
          assert.equal(m[3], want, `${m[1]} answers on its own port for targetPort "app"`);
          seen.add(m[1].slice(0, 7));
        }
        console.log(`# named targetPort: answered by ${[...seen].join(', ')}`);
      });

      test('a multi-port Service', async () => {
        assert.match(await viaSocks(transport, 'http://multi.shop:80/'), /^pod=multi-\S+ namespace=shop port=8080$/m);
        assert.match(await viaSocks(transport, 'http://multi.shop:8090/'), /^pod=multi-\S+ namespace=shop port=9090$/m);
        const { reply, socket, rest } = await socks5Connect(proxy(transport).socks!, 'multi.shop', 7000);
        assert.equal(reply, 0);
        const payload = Buffer.from(`echo through ${transport}\n`);
        socket.write(payload);
        const back = Buffer.concat([rest, await new Reader(socket).read(payload.length - rest.length)]);
        socket.destroy();
        assert.deepEqual(back, payload);
      });
    });

    describe('data through the real streaming server', () => {
      test('a download of 8 MiB arrives whole and in order', async () => {
        const { reply, socket, rest } = await socks5Connect(proxy(transport).socks!, 'bulk.shop', 9100);
        assert.equal(reply, 0);
        const t0 = Date.now();
        const reader = new Reader(socket);
        const body = Buffer.concat([rest, await reader.read(BULK_BYTES - rest.length)]);
        const ms = Date.now() - t0;
        // Then the close: the streaming server (as containerd) gives the other direction a second.
        assert.equal((await reader.readAll()).length, 0, 'nothing after the 8 MiB');
        const closeMs = Date.now() - t0 - ms;
        socket.destroy();
        // proxyout/bulk repeats a..z in 64 KiB blocks.
        for (let i = 0; i < body.length; i += 4099) assert.equal(body[i], 97 + ((i % 65536) % 26), `byte ${i}`);
        console.log(`# ${transport}: 8 MiB in ${ms} ms, closed ${closeMs} ms after the last byte`);
      });

      test('4 MiB echoed while being sent', async () => {
        const payload = Buffer.alloc(4 << 20);
        for (let i = 0; i < payload.length; i++) payload[i] = (i * 7 + (i >> 12)) & 0xff;
        const { reply, socket, rest } = await socks5Connect(proxy(transport).socks!, 'multi.shop', 7000);
        assert.equal(reply, 0);
        const reader = new Reader(socket);
        socket.write(payload);
        const back = Buffer.concat([rest, await reader.read(payload.length - rest.length, 60_000)]);
        socket.destroy();
        assert.ok(back.equals(payload), 'the same bytes came back');
      });
    });

    describe('HTTP listener', () => {
      test('CONNECT', async () => {
        assert.match(await viaConnect(transport, 'http://web.shop/'), /^pod=web-\S+ namespace=shop port=8080$/m);
        assert.match(await viaConnect(transport, 'http://db-1.db-headless.shop.svc.cluster.local:8080/'), /^pod=db-1 /m);
      });

      test('absolute-form', async () => {
        assert.match(await viaAbsoluteForm(transport, 'http://web.shop/'), /^pod=web-\S+ namespace=shop port=8080$/m);
        assert.match(await viaAbsoluteForm(transport, `http://${webClusterIP}/`), /^pod=web-\S+ namespace=shop port=8080$/m);
      });
    });

    describe('refusals', () => {
      test('an unknown Service: SOCKS 0x04, HTTP 502', async () => {
        assert.equal(await socksReply(transport, 'nosuch.shop', 80), 0x04);
        assert.equal(await httpStatus(transport, 'http://nosuch.shop/'), 502);
        assert.equal(await connectStatus(transport, 'nosuch.shop', 80), 502);
      });

      test('a Service with no ready endpoint: SOCKS 0x04, HTTP 503', async () => {
        assert.equal(await socksReply(transport, 'unready.shop', 80), 0x04);
        assert.equal(await httpStatus(transport, 'http://unready.shop/'), 503);
      });

      test('a port the Service lacks: SOCKS 0x05, HTTP 502', async () => {
        assert.equal(await socksReply(transport, 'web.shop', 81), 0x05);
        assert.equal(await httpStatus(transport, 'http://web.shop:81/'), 502);
      });

      test('a pod port nothing listens on (the streaming server refuses): SOCKS 0x05, HTTP 502', async () => {
        assert.equal(await socksReply(transport, webPodIP, 9999), 0x05);
        assert.equal(await httpStatus(transport, `http://${webPodIP}:9999/`), 502);
        await viaSocks(transport, 'http://web.shop/'); // and the tunnel still serves
      });
    });
  });
}

describe('real cluster: a Deployment rolled while 8 clients make requests', { skip }, () => {
  for (const transport of TRANSPORTS) {
    test(`no request fails (--transport ${transport})`, async (t) => {
      const c = cluster!;
      type PodList = { items: Array<{ metadata: { name: string; deletionTimestamp?: string } }> };
      const podsNow = async () => (JSON.parse((await c.kubectl(['-n', 'shop', 'get', 'pods', '-l', 'app=roll', '-o', 'json'])).stdout) as PodList).items;
      const before = new Set((await podsNow()).map((p) => p.metadata.name));
      let running = true;
      let ok = 0;
      const failures: string[] = [];
      const seen = new Set<string>();
      const client = async () => {
        while (running) {
          const r = await curl(['--proxy', `socks5h://${proxy(transport).socks}`, 'http://roll.shop/'], 10_000);
          const pod = r.code === 0 ? servedBy(r.stdout)?.[1] : undefined;
          if (pod) {
            ok++;
            seen.add(pod);
          } else failures.push(`curl ${r.code}: ${r.stderr.trim()}`);
        }
      };
      const clients = Array.from({ length: 8 }, client);
      await delay(300);
      const t0 = Date.now();
      await c.kubectl(['-n', 'shop', 'rollout', 'restart', 'deployment/roll']);
      await c.kubectl(['-n', 'shop', 'rollout', 'status', 'deployment/roll', '--timeout=60s']);
      // Until the old pods are gone (not just replaced in the rollout's count).
      while ((await podsNow()).some((p) => before.has(p.metadata.name)) && Date.now() - t0 < 60_000) await delay(100);
      const rolledMs = Date.now() - t0;
      await delay(500);
      running = false;
      await Promise.all(clients);
      const line = `${transport}: rolled in ${rolledMs} ms; ${ok} requests answered by ${seen.size} pods, ${failures.length} failed`;
      t.diagnostic(line);
      console.log(`# ${line}`);
      assert.deepEqual(failures, [], 'no failed request during the rollout');
      assert.ok(
        [...seen].some((p) => !before.has(p)),
        'the new pods answered',
      );
    });
  }
});

describe('real cluster: a StatefulSet pod deleted and recreated under its name', { skip }, () => {
  for (const transport of TRANSPORTS) {
    test(`is reached again within seconds (--transport ${transport})`, async (t) => {
      const c = cluster!;
      const url = 'http://db-0.db-headless.shop.svc.cluster.local:8080/';
      const uidVia = async (): Promise<string | undefined> => {
        const r = await curl(['--proxy', `socks5h://${proxy(transport).socks}`, '-si', url], 5_000);
        return r.code === 0 ? /^x-pod-uid: (\S+)/im.exec(r.stdout)?.[1] : undefined;
      };
      const oldUid = await uidVia();
      assert.ok(oldUid, 'db-0 answers before');
      await c.kubectl(['-n', 'shop', 'delete', 'pod', 'db-0', '--wait=false']);
      const t0 = Date.now();
      let failures = 0;
      for (;;) {
        const uid = await uidVia();
        if (uid && uid !== oldUid) break;
        if (!uid) failures++;
        if (Date.now() - t0 > 20_000) assert.fail(`the new db-0 not reached within 20 s (${failures} failed requests)`);
        await delay(100);
      }
      const ms = Date.now() - t0;
      t.diagnostic(`new db-0 reached ${ms} ms after the delete (${failures} requests failed meanwhile)`);
      console.log(`# ${transport}: new db-0 reached ${ms} ms after the delete (${failures} requests failed meanwhile)`);
      assert.ok(ms <= 10_000, `reached after ${ms} ms`);
    });
  }
});

describe('real cluster: sessionAffinity ClientIP', { skip }, () => {
  for (const transport of TRANSPORTS) {
    test(`a client stays on one pod, and moves to another for good when that one goes (--transport ${transport})`, async (t) => {
      const c = cluster!;
      const podOf = async (host: string): Promise<string | undefined> => {
        const r = await curl(['--proxy', `socks5h://${proxy(transport).socks}`, `http://${host}/`], 5_000);
        return r.code === 0 ? servedBy(r.stdout)?.[1] : undefined;
      };
      const answers = async (host: string, n: number) => {
        const pods: Array<string | undefined> = [];
        for (let i = 0; i < n; i++) pods.push(await podOf(host));
        return pods;
      };
      // The same three pods without affinity: spread, so one pod below is the affinity's doing.
      assert.ok(new Set(await answers('spread.shop', 6)).size > 1, 'spread over the pods without affinity');
      const stuck = await answers('sticky.shop', 9);
      assert.equal(new Set(stuck).size, 1, `one pod: ${stuck.join(' ')}`);
      const first = stuck[0]!;
      assert.ok(first, 'answered');

      await c.kubectl(['-n', 'shop', 'delete', 'pod', first, '--wait=false']);
      const t0 = Date.now();
      let moved: string | undefined;
      while (!moved) {
        const pod = await podOf('sticky.shop');
        if (pod && pod !== first) moved = pod;
        else if (Date.now() - t0 > 20_000) assert.fail(`still ${first} 20 s after its delete`);
        else await delay(100);
      }
      t.diagnostic(`moved from ${first} to ${moved} ${Date.now() - t0} ms after the delete`);
      assert.deepEqual(new Set(await answers('sticky.shop', 6)), new Set([moved]), 'and stays there');
    });
  }
});

describe('real cluster: the namespace-limited user (RBAC: admin in shop only)', { skip }, () => {
  let limited: ProxyProcess | undefined;
  after(async () => {
    const code = await limited?.stop();
    if (limited) assert.equal(code, 0);
  });

  test('reaches its namespace; another namespace is refused, saying why', async () => {
    const c = cluster!;
    const denied = await c.kubectl(['--context', 'limited', 'get', 'svc', '-n', 'other'], { allowFail: true });
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /forbidden/, 'upstream RBAC refuses the limited user outside shop');
    limited = await startProxyProcess(['--kubeconfig', c.kubeconfig, '--context', 'limited', '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
    const ok = await curl(['--proxy', `socks5h://${limited.socks}`, 'http://web.shop/']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^pod=web-\S+ namespace=shop port=8080$/m);
    assert.match((await curl(['--proxy', `socks5h://${limited.socks}`, 'http://web/'])).stdout, /namespace=shop/, 'short names use the context namespace');
    const { reply, socket } = await socks5Connect(limited.socks!, 'web.other.svc.cluster.local', 80);
    socket.destroy();
    const status = (await curl(['-x', `http://${limited.http}`, '-o', '/dev/null', '-w', '%{http_code}', 'http://web.other.svc.cluster.local/'])).stdout;
    await delay(200);
    const failed = limited.logs.filter((l) => l.msg !== undefined && String(l.msg).startsWith('stream failed') && String(l.target).startsWith('web.other'));
    console.log(`# limited user, web.other: SOCKS reply ${reply}, HTTP ${status}: ${failed.map((l) => `${String(l.reason)}: ${String(l.msg)}`).join(' | ')}`);
    assert.equal(reply, 0x02, 'SOCKS 0x02 not allowed');
    assert.equal(status, '403');
    assert.ok(failed.length > 0, 'a stream failed line says why');
    for (const l of failed) {
      assert.equal(l.reason, 'not-allowed');
      assert.match(String(l.msg), /not allowed to watch namespace "other": services is forbidden: User "proxyout-limited" cannot watch resource "services"/);
    }
  });

  test('doctor reports the real RBAC verdicts: cluster-wide, one namespace, and no port-forward (a viewer, by impersonation)', async () => {
    const c = cluster!;
    // A ServiceAccount with the built-in view ClusterRole in shop: it may list and watch, not port-forward.
    await c.kubectl(['apply', '-f', '-'], {
      input: `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: viewer, namespace: shop}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: viewer, namespace: shop}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: [{kind: ServiceAccount, name: viewer, namespace: shop}]\n`,
    });
    type Doc = { users: Array<{ name: string; user: Record<string, unknown> }>; contexts: Array<{ name: string; context: Record<string, unknown> }> };
    const doc = yaml.load(await readFile(c.kubeconfig, 'utf8')) as Doc;
    const cluster0 = doc.contexts[0]!.context.cluster;
    doc.users.push({ name: 'viewer', user: { token: c.tokens.admin, as: 'system:serviceaccount:shop:viewer' } });
    doc.contexts.push({ name: 'viewer', context: { cluster: cluster0, user: 'viewer', namespace: 'shop' } });
    const kubeconfig = path.join(c.dir, 'kubeconfig-viewer');
    await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
    const doctor = async (context: string) => {
      const r = await runCli(['doctor', '--kubeconfig', kubeconfig, '--context', context, '--listen-socks', '127.0.0.1:0', '--json']);
      const checks = (JSON.parse(r.stdout) as { checks: Array<{ name: string; status: string; detail: string }> }).checks;
      return { code: r.code, rbac: checks.find((x) => x.name === 'rbac')!, portForward: checks.find((x) => x.name === 'port-forward')! };
    };
    const admin = await doctor('admin');
    assert.equal(admin.rbac.status, 'ok');
    assert.match(admin.rbac.detail, /^cluster-wide: list services, watch services, .*create pods\/portforward$/);
    assert.match(admin.portForward.detail, /SPDY over WebSocket: yes; per-stream WebSocket v4: yes; legacy SPDY: yes/);
    const limitedUser = await doctor('limited');
    assert.equal(limitedUser.rbac.status, 'ok');
    assert.match(limitedUser.rbac.detail, /^in namespace shop only \(not cluster-wide/);
    const viewer = await doctor('viewer');
    assert.equal(viewer.code, 1);
    assert.equal(viewer.rbac.status, 'fail');
    assert.match(viewer.rbac.detail, /not allowed in namespace shop nor cluster-wide: get pods\/portforward, create pods\/portforward$/);
    // Each protocol's refusal in the API server's words, not its JSON.
    assert.equal(viewer.portForward.status, 'fail');
    assert.match(
      viewer.portForward.detail,
      /SPDY over WebSocket: no \(HTTP 403: pods "\S+" is forbidden: User "system:serviceaccount:shop:viewer" cannot get resource "pods\/portforward"/,
    );
    assert.doesNotMatch(viewer.portForward.detail, /"kind":"Status"/);
  });
});

/**
 * Creates a Service like web under a new name and times until the proxy reaches it; also when
 * its EndpointSlice (kube-controller-manager's) first had a ready endpoint, to tell the
 * controller's share of the wait from the proxy's.
 */
async function timeNewService(t: TestContext, name: string, transport: Transport): Promise<{ ms: number; sliceMs: number }> {
  const c = cluster!;
  await c.kubectl(['apply', '-f', '-'], { input: manifests(service(name, { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 'http' }] })) });
  const created = Date.now();
  const slicePoll = endpointSliceReadyMs(c, name, created);
  for (;;) {
    const r = await curl(['--proxy', `socks5h://${proxy(transport).socks}`, `http://${name}.shop/`], 5_000);
    if (r.code === 0 && /^pod=web-/m.test(r.stdout)) break;
    if (Date.now() - created > 30_000) assert.fail(`${name}.shop not reachable within 30 s of its creation: ${r.stderr}`);
    await delay(100);
  }
  const ms = Date.now() - created;
  const sliceMs = await slicePoll;
  const line = `${name} via ${transport}: reachable ${ms} ms after kubectl apply returned; its EndpointSlice had a ready endpoint after ${sliceMs ?? '?'} ms`;
  t.diagnostic(line);
  console.log(`# ${line}`);
  return { ms, sliceMs: sliceMs ?? ms };
}

describe('real cluster: etcd compaction and API server restart', { skip }, () => {
  test('a hung API server (SIGSTOP: it accepts and answers nothing): idle routes turn degraded within 20 s, and serve again after', async (t) => {
    const c = cluster!;
    const since = new Map(TRANSPORTS.map((transport) => [transport, proxy(transport).logs.length]));
    const logged = (msg: string) =>
      TRANSPORTS.every((transport) =>
        proxy(transport)
          .logs.slice(since.get(transport))
          .some((l) => l.msg === msg),
      );
    // Idle: nothing fails to tell the proxies (no stream, and a watch waits a minute for its bookmark).
    await delay(1_000);
    const t0 = Date.now();
    c.freezeApiServer(true);
    try {
      await eventually(async () => logged('cluster route degraded'), 25_000, 200);
      t.diagnostic(`degraded ${Date.now() - t0} ms after the API server hung`);
    } finally {
      c.freezeApiServer(false);
    }
    const t1 = Date.now();
    await eventually(async () => logged('cluster route serving again'), 15_000, 200);
    t.diagnostic(`serving again ${Date.now() - t1} ms after it resumed`);
    for (const transport of TRANSPORTS) assert.match(await viaSocks(transport, 'http://web.shop/'), /^pod=web-\S+ namespace=shop port=8080$/m);
    c.assertHealthy();
  });

  test('a Service created after an etcd compaction is reachable within 2 s', async (t) => {
    // Some churn first, so that the compaction leaves the proxy's watches behind.
    for (let i = 0; i < 3; i++) await cluster!.kubectl(['-n', 'shop', 'annotate', '--overwrite', 'svc/web', `churn=${i}`]);
    const rev = await cluster!.compact();
    t.diagnostic(`compacted at revision ${rev}`);
    for (const transport of TRANSPORTS) {
      const { ms } = await timeNewService(t, `after-compact-${transport}`, transport);
      assert.ok(ms <= 2000, `reachable after ${ms} ms; target 2 s`);
    }
  });

  test('a Service created after the API server restarts (etcd compacted meanwhile) is reachable within 2 s of its EndpointSlice', async (t) => {
    const c = cluster!;
    for (let i = 0; i < 3; i++) await c.kubectl(['-n', 'shop', 'annotate', '--overwrite', 'svc/web', `churn=r${i}`]);
    const t0 = Date.now();
    // Compacted while the API server is down: the watches the proxy re-opens ask for a
    // resourceVersion older than anything the new API server can serve.
    await c.restartApiServer({ whileDown: async () => void (await c.compact()) });
    t.diagnostic(`API server restarted in ${Date.now() - t0} ms`);
    for (const transport of TRANSPORTS) {
      // After a restart kube-controller-manager's own watches come back with a backoff, so the
      // EndpointSlice may take a second or more: the target is on the proxy's share.
      const { ms, sliceMs } = await timeNewService(t, `after-restart-${transport}`, transport);
      assert.ok(ms - sliceMs <= 2000, `reachable ${ms - sliceMs} ms after its EndpointSlice was ready (${ms} ms after creation); target 2 s`);
    }
    c.assertHealthy();
  });
});
