// Developers with few rights, against the real control plane (v1.37.2 RBAC): ServiceAccount token
// users (`kubectl create token`), Roles in one namespace only, pods/portforward on named pods only
// (resourceNames), no right to look pods up. One cluster for the file. Skips with a reason when
// the test bed is not built (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import yaml from 'js-yaml';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, service, statefulSet, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged } from '../helpers/real-cluster-setup.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { runDoctor } from '../helpers/doctor.js';

const skip = skipUnlessRealCluster();

const ROLES = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read, namespace: shop}
rules:
- {apiGroups: [""], resources: [services], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods, namespace: shop}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pf, namespace: shop}
rules: [{apiGroups: [""], resources: [pods/portforward], verbs: [get, create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pf-db-0, namespace: shop}
rules: [{apiGroups: [""], resources: [pods/portforward], verbs: [get, create], resourceNames: [db-0]}]
`;

/** Each user: a ServiceAccount in shop bound to these Roles there, nothing cluster-wide. */
const USERS: Record<string, string[]> = { dev: ['read', 'pods', 'pf'], 'no-pods': ['read', 'pf'], named: ['read', 'pods', 'pf-db-0'] };

const binding = (user: string, role: string) => `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ${user}-${role}, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${role}}
subjects: [{kind: ServiceAccount, name: ${user}, namespace: shop}]
`;

let cluster: RealCluster | undefined;
let kubeconfig = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  const db = statefulSet({ name: 'db', replicas: 2, serviceName: 'db', containers: [httpContainer('db')] });
  await applyAndRollOut(cluster, manifests(webDeployment(2), webService(), db, service('db', { clusterIP: 'None', ports: [{ port: 8080 }] })), [
    'deployment/web',
    'statefulset/db',
  ]);
  const accounts = Object.keys(USERS).map((u) => `---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ${u}, namespace: shop}\n`);
  const bindings = Object.entries(USERS).flatMap(([u, roles]) => roles.map((r) => binding(u, r)));
  await cluster.kubectl(['apply', '-f', '-'], { input: [ROLES, ...accounts, ...bindings].join('') });
  type Doc = { users: Array<{ name: string; user: Record<string, unknown> }>; contexts: Array<{ name: string; context: Record<string, unknown> }> };
  const doc = yaml.load(await readFile(cluster.kubeconfig, 'utf8')) as Doc;
  const clusterName = doc.contexts[0]!.context.cluster;
  for (const name of Object.keys(USERS)) {
    const token = (await cluster.kubectl(['-n', 'shop', 'create', 'token', name, '--duration=1h'])).stdout.trim();
    doc.users.push({ name, user: { token } });
    doc.contexts.push({ name, context: { cluster: clusterName, user: name, namespace: 'shop' } });
  }
  kubeconfig = path.join(cluster.dir, 'kubeconfig-few');
  await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
});

after(async () => {
  await cluster?.stop();
});

function proxyAs(context: string): Promise<ProxyProcess> {
  return startProxyProcess(['--kubeconfig', kubeconfig, '--context', context, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
}

/** The body curl gets through the HTTP listener, and its status. */
async function viaHttp(proxy: ProxyProcess, url: string): Promise<{ status: string; body: string }> {
  const r = await curl(['-sS', '-w', '\n%{http_code}', '-x', `http://${proxy.http}`, url]);
  const lines = r.stdout.trimEnd().split('\n');
  return { status: lines.pop() ?? '', body: lines.join('\n').trim() };
}

/** What RBAC says of this user for `kubectl auth can-i ARGS`. */
async function canI(context: string, line: string): Promise<string> {
  const args = line.replace(/^kubectl auth can-i /, '').split(' ');
  const r = await cluster!.kubectl(['--kubeconfig', kubeconfig, '--context', context, 'auth', 'can-i', ...args], { allowFail: true });
  return r.stdout.trim();
}

/** Denied authorizations the API server made so far (no other client of this bed is refused). */
async function denials(): Promise<number> {
  const metrics = (await cluster!.request('GET', '/metrics')).body;
  return Number(/^authorization_attempts_total\{result="no-opinion"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
}

describe('real cluster: developers with few rights', { skip }, () => {
  test('pods/portforward on db-0 only: db-0 is served; db-1 is refused with a can-i line kubectl answers as the API server did', async () => {
    const proxy = await proxyAs('named');
    try {
      const allowed = await viaHttp(proxy, 'http://db-0.db.shop.svc.cluster.local:8080/');
      assert.equal(allowed.status, '200', allowed.body);
      const refused = await viaHttp(proxy, 'http://db-1.db.shop.svc.cluster.local:8080/');
      assert.equal(refused.status, '403', refused.body);
      const check = /\(check: (kubectl auth can-i \S+ pods\/db-1 --subresource=portforward -n shop)\)$/.exec(refused.body);
      assert.ok(check, refused.body);
      assert.equal(await canI('named', check[1]!), 'no');
      assert.equal(await canI('named', check[1]!.replace('pods/db-1', 'pods/db-0')), 'yes', 'the same line for the pod allowed says yes');
      // A client retrying the refused pod costs the API server one refused upgrade per 5 s, not one per connection.
      const before = await denials();
      const started = Date.now();
      for (let i = 0; i < 40; i++) await viaHttp(proxy, 'http://db-1.db.shop.svc.cluster.local:8080/');
      const denied = (await denials()) - before;
      console.log(`# ${denied} refused upgrades for 40 client requests in ${Date.now() - started} ms`);
      assert.ok(denied <= 2 + Math.ceil((Date.now() - started) / 5000), `${denied} refused upgrades`);
      // doctor: a warning naming the pods allowed, with lines kubectl answers as it says.
      const doctor = await runDoctor(['--kubeconfig', kubeconfig, '--context', 'named'], path.join(cluster!.dir, 'doctor-named'));
      const rbac = doctor.get('rbac');
      assert.equal(rbac.status, 'warn', rbac.detail);
      assert.equal(
        rbac.detail,
        "in namespace shop: get pods/portforward, create pods/portforward only on pods db-0 (a Role's resourceNames); other pods are refused",
      );
      const lines = /check with: kubectl .*? (auth can-i get pods\/db-0 \S+ -n shop) \(yes\) and kubectl .*? (auth can-i get pods \S+ -n shop) \(no\)$/.exec(
        rbac.fix ?? '',
      );
      assert.ok(lines, rbac.fix);
      assert.equal(await canI('named', `kubectl ${lines[1]!}`), 'yes');
      assert.equal(await canI('named', `kubectl ${lines[2]!}`), 'no');
    } finally {
      await proxy.stop();
    }
  });

  test('a namespace without a Role: refused naming the right, with a can-i line kubectl answers no to', async () => {
    const proxy = await proxyAs('dev');
    try {
      const refused = await viaHttp(proxy, 'http://kubernetes.default/');
      assert.equal(refused.status, '403', refused.body);
      const check = /not allowed to watch namespace "default": .* \(check: (kubectl auth can-i watch services -n default)\)$/.exec(refused.body);
      assert.ok(check, refused.body);
      assert.equal(await canI('dev', check[1]!), 'no');
      assert.equal(await canI('dev', 'kubectl auth can-i watch services -n shop'), 'yes');
      // The kubernetes Service's ClusterIP, in that namespace: unknown to this user, not absent.
      const byIp = await viaHttp(proxy, 'http://10.96.0.1:443/');
      assert.equal(byIp.status, '403', byIp.body);
      assert.match(
        byIp.body,
        /; route dev sees namespaces shop only \(not allowed to watch cluster-wide\), so 10\.96\.0\.1 may be another namespace's: reach it by its Service name \(svc\.namespace\)$/,
      );
    } finally {
      await proxy.stop();
    }
  });

  test('no right to look pods up: a Pod IP is refused 0x02 / 403 naming list pods, and a retrying client sends no 403 storm', async () => {
    const pods = JSON.parse((await cluster!.kubectl(['-n', 'shop', 'get', 'pods', '-o', 'json'])).stdout) as {
      items: Array<{ metadata: { name: string }; status: { podIP: string } }>;
    };
    const ip = pods.items.find((p) => p.metadata.name === 'db-1')!.status.podIP;
    const proxy = await proxyAs('no-pods');
    try {
      assert.equal((await viaHttp(proxy, 'http://web.shop/')).status, '200', 'Services need no pod look-up');
      const before = await denials();
      const started = Date.now();
      let last = { status: '', body: '' };
      for (let i = 0; i < 40; i++) last = await viaHttp(proxy, `http://${ip}:8080/`);
      const socks = await curl(['-sS', '--proxy', `socks5h://${proxy.socks}`, `http://${ip}:8080/`]);
      const denied = (await denials()) - before;
      assert.equal(last.status, '403', last.body);
      assert.match(
        last.body,
        /cannot list resource "pods".*; the proxy needs list on pods to find a Pod IP in namespace shop \(check: kubectl auth can-i list pods -n shop\)$/,
      );
      assert.match(socks.stderr, /\(2\)/, 'SOCKS 0x02 not allowed');
      console.log(`# ${denied} refused API requests for 41 client requests in ${Date.now() - started} ms`);
      assert.ok(denied <= 2 + Math.ceil((Date.now() - started) / 5000), `${denied} refused API requests: one per 5 s at most`);
    } finally {
      await proxy.stop();
    }
  });

  test('pods/portforward revoked while the proxy runs: a client asking every second is refused within seconds, SOCKS and HTTP', async () => {
    const proxy = await proxyAs('dev');
    try {
      assert.equal((await viaHttp(proxy, 'http://web.shop/')).status, '200');
      await cluster!.kubectl(['-n', 'shop', 'delete', 'rolebinding', 'dev-pf']);
      const revoked = Date.now();
      let http = await viaHttp(proxy, 'http://web.shop/');
      let socks = await curl(['-sS', '--proxy', `socks5h://${proxy.socks}`, 'http://web.shop/']);
      // Both pods' answers must be refusals: two in a row each way.
      let refusedInARow = 0;
      while (refusedInARow < 2 && Date.now() - revoked < 20_000) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        http = await viaHttp(proxy, 'http://web.shop/');
        socks = await curl(['-sS', '--proxy', `socks5h://${proxy.socks}`, 'http://web.shop/']);
        refusedInARow = http.status === '403' && socks.code === 97 ? refusedInARow + 1 : 0;
      }
      const seconds = (Date.now() - revoked) / 1000;
      console.log(`# refused ${seconds.toFixed(1)} s after the RoleBinding went`);
      assert.equal(http.status, '403', `still served ${seconds} s after the revocation: ${http.body}`);
      assert.match(http.body, /cannot get resource "pods\/portforward"/);
      assert.ok(seconds < 15, `${seconds} s`);
      await cluster!.kubectl(['apply', '-f', '-'], { input: binding('dev', 'pf') });
      const granted = Date.now();
      while ((await viaHttp(proxy, 'http://web.shop/')).status !== '200' && Date.now() - granted < 10_000) await new Promise((r) => setTimeout(r, 300));
      assert.equal((await viaHttp(proxy, 'http://web.shop/')).status, '200', 'served again once granted');
    } finally {
      await proxy.stop();
    }
  });
});
