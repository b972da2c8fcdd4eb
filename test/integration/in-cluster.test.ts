// Inside a pod, with no kubeconfig: the in-cluster configuration as kubectl reads it (the
// KUBERNETES_SERVICE_HOST/PORT variables and the service-account files), through the real CLI in a
// mount namespace where the files are at /var/run/secrets/kubernetes.io/serviceaccount.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';

const skip = (process.platform !== 'linux' || process.getuid?.() !== 0) && 'needs root on Linux (a mount namespace)';
let cluster: TestCluster;
let dir: string;
let serviceAccount: string;

before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-in-cluster-'));
  serviceAccount = path.join(dir, 'serviceaccount');
  mkdirSync(serviceAccount);
  mkdirSync(path.join(dir, 'home'));
  // Written as `echo` or a templating tool would, each with a trailing newline (kubectl trims them).
  writeFileSync(path.join(serviceAccount, 'token'), `${cluster.sim.adminToken}\n`);
  writeFileSync(path.join(serviceAccount, 'ca.crt'), cluster.sim.caPem);
  writeFileSync(path.join(serviceAccount, 'namespace'), 'shop\n');
});

after(async () => {
  await cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The CLI as in a pod: the service-account files mounted, no kubeconfig, an empty home. */
function inPod(args: string[], env: NodeJS.ProcessEnv = {}) {
  const mount =
    'run=$(readlink -f /var/run) && mount -t tmpfs tmpfs "$run" && mkdir -p "$run/secrets/kubernetes.io/serviceaccount" && ' +
    'mount --bind "$0" "$run/secrets/kubernetes.io/serviceaccount" && exec "$@"';
  const port = new URL(cluster.sim.server).port;
  return runCli(args, {
    env: {
      HOME: path.join(dir, 'home'),
      KUBECONFIG: undefined,
      XDG_STATE_HOME: undefined,
      XDG_CONFIG_HOME: undefined,
      KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state'),
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: port,
      POD_NAMESPACE: undefined,
      ...env,
    },
    timeoutMs: 60_000,
    via: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', mount, serviceAccount],
  });
}

test('the service account token and namespace are read as kubectl reads them, trailing newlines and all', { skip }, async () => {
  const r = await inPod(['exec', '--', 'sh', '-c', 'curl -s --max-time 20 http://web:8080/whoami']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /started a temporary one for this command \(context inClusterContext, namespace shop;/);
  assert.match(r.stdout, /"namespace":"shop"/, 'the short name reached web.shop');
});

test('POD_NAMESPACE comes before the namespace file, as for kubectl', { skip }, async () => {
  const r = await inPod(['exec', '--', 'true'], { POD_NAMESPACE: 'billing' });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /\(context inClusterContext, namespace billing;/);
});

test('a token without KUBERNETES_SERVICE_HOST/PORT (sudo, env -i) is one line saying so', { skip }, async () => {
  const r = await inPod(['exec', '--', 'true'], { KUBERNETES_SERVICE_HOST: undefined, KUBERNETES_SERVICE_PORT: undefined });
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    'Error: no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config; the service-account token /var/run/secrets/kubernetes.io/serviceaccount/token is there, but without KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (sudo and env -i drop them) the in-cluster configuration is not used, as by kubectl\n',
  );
});

test('a KUBECONFIG naming only files that are not there (an image default) still reads it, as kubectl does', { skip }, async () => {
  const r = await inPod(['exec', '--', 'true'], { KUBECONFIG: path.join(dir, 'no-such-kubeconfig') });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /\(context inClusterContext, namespace shop;/);
  // Outside a pod, naming a file that is not there is still a mistake to point out.
  const outside = await runCli(['exec', '--', 'true'], { env: { KUBECONFIG: path.join(dir, 'no-such-kubeconfig') } });
  assert.equal(outside.code, 1);
  assert.match(outside.stderr, /^Error: no kubeconfig file from KUBECONFIG exists \(.*no-such-kubeconfig\)$/m);
});
