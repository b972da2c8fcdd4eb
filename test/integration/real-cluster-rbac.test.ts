// What users with part of the rights are told, against the real control plane (v1.37.2: RBAC,
// SelfSubjectAccessReview and the port-forward authorization are upstream's): doctor's verdict
// must match what the proxy then does with the same user. ServiceAccounts by impersonation (the
// admin token with `as:`), real curl. Skips with a reason when the test bed is not built (fails
// instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import yaml from 'js-yaml';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { limitedUserManifests } from '../helpers/real-cluster-config.js';
import { deployment, httpContainer, manifests, namespace, service, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged } from '../helpers/real-cluster-setup.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { runDoctor } from '../helpers/doctor.js';
import { curl } from '../helpers/curl.js';

const skip = skipUnlessRealCluster();

/** Everything the proxy reads, cluster-wide; port-forward is granted per user below. */
const READER = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: proxyout-reader}
rules:
- {apiGroups: [""], resources: [services], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
`;

/** A ServiceAccount in shop with the reader ClusterRole and these verbs on pods/portforward. */
function user(name: string, portForwardVerbs: string[]): string {
  return `---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ${name}, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ${name}-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: proxyout-reader}
subjects: [{kind: ServiceAccount, name: ${name}, namespace: shop}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ${name}-portforward}
rules: [{apiGroups: [""], resources: [pods/portforward], verbs: [${portForwardVerbs.join(', ')}]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ${name}-portforward}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${name}-portforward}
subjects: [{kind: ServiceAccount, name: ${name}, namespace: shop}]
`;
}

const USERS = { 'create-only': ['create'], 'get-only': ['get'], 'get-and-create': ['get', 'create'] } as const;

let cluster: RealCluster | undefined;
let kubeconfig = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await applyAndRollOut(cluster, manifests(webDeployment(1), webService()), ['deployment/web']);
  await cluster.kubectl(['apply', '-f', '-'], {
    input:
      READER +
      Object.entries(USERS)
        .map(([name, verbs]) => user(name, [...verbs]))
        .join(''),
  });
  type Doc = { users: Array<{ name: string; user: Record<string, unknown> }>; contexts: Array<{ name: string; context: Record<string, unknown> }> };
  const doc = yaml.load(await readFile(cluster.kubeconfig, 'utf8')) as Doc;
  const clusterName = doc.contexts[0]!.context.cluster;
  for (const name of Object.keys(USERS)) {
    doc.users.push({ name, user: { token: cluster.tokens.admin, as: `system:serviceaccount:shop:${name}` } });
    doc.contexts.push({ name, context: { cluster: clusterName, user: name, namespace: 'shop' } });
  }
  // The namespace-limited user (admin in shop only) in a context whose namespace is another.
  doc.contexts.push({ name: 'limited-elsewhere', context: { cluster: clusterName, user: 'limited', namespace: 'default' } });
  // The namespace-limited user impersonating someone, which it may not.
  doc.users.push({ name: 'limited-as', user: { token: cluster.tokens.limited, as: 'alice' } });
  doc.contexts.push({ name: 'limited-as', context: { cluster: clusterName, user: 'limited-as', namespace: 'shop' } });
  kubeconfig = path.join(cluster.dir, 'kubeconfig-rbac');
  await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
});

after(async () => {
  await cluster?.stop();
});

/** A command line doctor printed, run as pasted into a shell whose kubeconfig's current context is admin. */
function pasted(line: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const [file, ...args] = line.split(' ');
  return new Promise((resolve) => {
    execFile(file!, args, { encoding: 'utf8', env: { ...process.env, KUBECONFIG: cluster!.kubeconfig } }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** doctor's rbac verdict for the context, and what curl gets through a proxy running as it. */
async function verdictAndReality(context: string) {
  const doctor = await runDoctor(['--kubeconfig', kubeconfig, '--context', context], path.join(cluster!.dir, `doctor-${context}`));
  const proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--context', context, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
  try {
    const socks = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc/']);
    const http = await curl(['-w', '\n%{http_code}', '-x', `http://${proxy.http}`, 'http://web.shop.svc/']);
    const [httpStatus, ...body] = http.stdout.split('\n').reverse();
    // svc.ns: these users may not list namespaces, so the name is tried on the default route, with a fallback.
    const shortName = await curl(['-x', `http://${proxy.http}`, 'http://web.shop/']);
    return { doctor, socks, httpStatus, httpBody: body.reverse().join('\n').trim(), shortNameBody: shortName.stdout.trim() };
  } finally {
    await proxy.stop();
  }
}

describe('real cluster: users with part of the rights', { skip }, () => {
  test('create on pods/portforward alone: doctor fails naming get, and the proxy is indeed refused', async () => {
    const { doctor, socks, httpStatus, shortNameBody } = await verdictAndReality('create-only');
    assert.equal(socks.code, 97, `the proxy is refused: ${socks.stdout}`);
    // The route found the pod: the refusal is the API server's, not "not served by any route".
    assert.match(
      shortNameBody,
      /^kubectl-proxyout: cluster route create-only: port-forward .* refused by the API server \(403\): .*cannot get resource "pods\/portforward"/,
    );
    assert.equal(httpStatus, '403');
    const rbac = doctor.get('rbac');
    assert.equal(rbac.status, 'fail', rbac.detail);
    assert.match(rbac.detail, /nor cluster-wide: get pods\/portforward$/);
    assert.equal(doctor.code, 1);
    // The command the fix gives, pasted as is (as the user), answers as the API server decided.
    // In a shell whose current context is another user's (admin, who may do anything).
    const check = /get\/create on pods\/portforward; check with: (kubectl .*auth can-i .*)$/.exec(rbac.fix ?? '');
    assert.ok(check, rbac.fix);
    assert.equal((await pasted(check[1]!)).stdout.trim(), 'no', `${check[1]} agrees`);
  });

  test('get on pods/portforward alone: the client is told which rights to ask for (the API server names none)', async () => {
    const { doctor, socks, httpStatus, httpBody } = await verdictAndReality('get-only');
    assert.equal(socks.code, 97);
    assert.match(socks.stderr, /\(2\)/, 'SOCKS 0x02 not allowed');
    assert.equal(httpStatus, '403');
    // v1.37's create check for a WebSocket upgrade answers `pods "web-…" is forbidden: ` and no more.
    assert.match(
      httpBody,
      /^kubectl-proxyout: cluster route get-only: port-forward .*shop\/web-\S+ refused by the API server \(403\): pods "web-\S+" is forbidden; the proxy needs get and create on pods\/portforward in namespace shop \(check: kubectl auth can-i create pods\/web-\S+ --subresource=portforward -n shop\)$/,
    );
    assert.match(doctor.get('rbac').detail, /nor cluster-wide: create pods\/portforward$/);
  });

  test('get and create on pods/portforward: doctor passes, and the proxy serves', async () => {
    const { doctor, socks, httpStatus } = await verdictAndReality('get-and-create');
    assert.equal(socks.code, 0, socks.stderr);
    assert.match(socks.stdout, /^pod=web-\S+ namespace=shop port=8080$/m);
    assert.equal(httpStatus, '200');
    const rbac = doctor.get('rbac');
    assert.equal(rbac.status, 'ok', rbac.detail);
    assert.match(rbac.detail, /^cluster-wide: list services, .*, get pods\/portforward, create pods\/portforward$/);
    assert.equal(doctor.get('port-forward').status, 'ok');
  });

  test('a user who may read no namespace of its context: the start fails in one line naming the context, the resources and the way out', async () => {
    const r = await runCli(['--kubeconfig', kubeconfig, '--context', 'limited-elsewhere', '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    const lines = r.stderr.split('\n').filter((l) => l && !l.startsWith('{'));
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0]!,
      /^Error: context "limited-elsewhere" may not watch Services and EndpointSlices cluster-wide nor in namespace "default": services is forbidden: User "proxyout-limited" cannot watch resource "services" .*; use a namespace it may read \(the context's namespace, or -n\) or ask for list\/watch on services and endpointslices there \(`kubectl proxyout doctor --context limited-elsewhere -n default` lists what is missing\)$/,
    );
    // The way out it names works: the same context with -n shop serves.
    const proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--context', 'limited-elsewhere', '-n', 'shop', '--listen-socks', '127.0.0.1:0']);
    try {
      const served = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web/']);
      assert.match(served.stdout, /^pod=web-\S+ namespace=shop port=8080$/m, served.stderr);
    } finally {
      await proxy.stop();
    }
  });

  test('a namespace RBAC refused is reached within seconds of a RoleBinding granting it, the proxy running on', async () => {
    const other = manifests(
      namespace('granted-later'),
      deployment({ name: 'web', namespace: 'granted-later', replicas: 1, containers: [httpContainer('web')] }),
      service('web', { namespace: 'granted-later', selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] }),
    );
    await cluster!.kubectl(['apply', '-f', '-'], { input: other });
    await cluster!.kubectl(['-n', 'granted-later', 'rollout', 'status', 'deployment/web', '--timeout=60s']);
    const proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--context', 'limited', '--listen-socks', '127.0.0.1:0']);
    try {
      const get = () => curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.granted-later/']);
      assert.notEqual((await get()).code, 0, 'refused while the user may not read the namespace');
      await cluster!.kubectl(['apply', '-f', '-'], { input: limitedUserManifests('granted-later') });
      const granted = Date.now();
      let served = await get();
      while (served.code !== 0 && Date.now() - granted < 10_000) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        served = await get();
      }
      assert.match(served.stdout, /^pod=web-\S+ namespace=granted-later port=8080$/m, `not served within 10 s of the grant: ${served.stderr}`);
      console.log(`# served ${Date.now() - granted} ms after the RoleBinding`);
    } finally {
      await proxy.stop();
    }
  });

  test('a user whose `as` is refused: start and doctor blame the impersonation, not list/watch rights', async () => {
    const r = await runCli(['--kubeconfig', kubeconfig, '--context', 'limited-as', '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    const lines = r.stderr.split('\n').filter((l) => l && !l.startsWith('{'));
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0]!,
      /^Error: context "limited-as" may not impersonate whom its kubeconfig user names: .*User "proxyout-limited" cannot impersonate.*; ask for the impersonate verb on the users and groups its `as`\/`as-groups` name, or remove `as` from the kubeconfig user$/,
    );
    const doctor = await runDoctor(['--kubeconfig', kubeconfig, '--context', 'limited-as'], path.join(cluster!.dir, 'doctor-limited-as'));
    assert.match(doctor.get('kubeconfig').detail, /user limited-as as alice,/);
    const api = doctor.get('api-server');
    assert.equal(api.status, 'fail');
    assert.match(api.fix ?? '', /user limited-as may not impersonate whom it names: ask for the impersonate verb/);
  });
});
