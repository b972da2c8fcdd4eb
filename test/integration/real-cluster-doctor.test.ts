// doctor's port-forward check on a cluster with pods its kubelet no longer has (the node stand-in's
// `proxyout.test/kubelet-gone`: 404 `pod does not exist`, as for pods left on a node that went
// away, whose status still says Running). Such a pod says nothing of the API server: doctor asks
// the next pod, not-Ready pods last, and fails only when every pod it asks is refused so. Skips
// with a reason when the real-cluster binaries are not built.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, namespace, pod } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged } from '../helpers/real-cluster-setup.js';
import { runDoctor } from '../helpers/doctor.js';

const skip = skipUnlessRealCluster();
const GONE = { 'proxyout.test/kubelet-gone': 'true' };

let cluster: RealCluster | undefined;

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  // Listed by name: the lost pods come first in each namespace.
  const objects = [
    namespace('lost'),
    pod({ name: 'a-lost', namespace: 'lost', annotations: GONE, containers: [httpContainer('web')] }),
    pod({ name: 'b-fine', namespace: 'lost', containers: [httpContainer('web')] }),
    namespace('unready'),
    pod({ name: 'a-unready', namespace: 'unready', annotations: { ...GONE, 'proxyout.test/ready': 'false' }, containers: [httpContainer('web')] }),
    pod({ name: 'b-fine', namespace: 'unready', containers: [httpContainer('web')] }),
    namespace('all-lost'),
    pod({ name: 'a-lost', namespace: 'all-lost', annotations: GONE, containers: [httpContainer('web')] }),
    pod({ name: 'b-lost', namespace: 'all-lost', annotations: GONE, containers: [httpContainer('web')] }),
    // More pods that do not run than a page holds, before the one that does (a namespace of
    // evicted or finished pods): Pending here, on a node that does not exist.
    namespace('crowded'),
    ...Array.from({ length: 101 }, (_, i) =>
      pod({
        name: `a-${String(i).padStart(3, '0')}`,
        namespace: 'crowded',
        containers: [httpContainer('web')],
        spec: { nodeSelector: { 'kubernetes.io/hostname': 'nowhere' } },
      }),
    ),
    pod({ name: 'z-fine', namespace: 'crowded', containers: [httpContainer('web')] }),
  ];
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(...objects) });
  for (const ns of ['lost', 'all-lost']) await cluster.kubectl(['-n', ns, 'wait', '--for=condition=Ready', 'pod', '--all', '--timeout=60s']);
  await cluster.kubectl(['-n', 'unready', 'wait', '--for=condition=Ready', 'pod/b-fine', '--timeout=60s']);
  await cluster.kubectl(['-n', 'unready', 'wait', '--for=jsonpath={.status.phase}=Running', 'pod/a-unready', '--timeout=60s']);
  await cluster.kubectl(['-n', 'crowded', 'wait', '--for=condition=Ready', 'pod/z-fine', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
});

after(async () => {
  await cluster?.stop();
});

const doctor = (ns: string) => runDoctor(['--kubeconfig', cluster!.kubeconfig, '-n', ns], path.join(cluster!.dir, `doctor-${ns}`));

describe('real cluster: doctor and pods their kubelet no longer has', { skip }, () => {
  test('the first pod is refused by its kubelet: the next one is asked, and the check passes naming both', async () => {
    const r = await doctor('lost');
    const check = r.get('port-forward');
    assert.equal(check.status, 'ok', check.detail);
    assert.match(
      check.detail,
      /^pod lost\/b-fine: SPDY over WebSocket: yes; per-stream WebSocket v4: yes; legacy SPDY: yes; passed over, .*lost\/a-lost \(HTTP 404: pod does not exist\)$/,
    );
    assert.equal(r.code, 0, r.out);
  });

  test('a pod that is not Ready is asked last', async () => {
    const check = (await doctor('unready')).get('port-forward');
    assert.equal(check.status, 'ok', check.detail);
    assert.match(check.detail, /^pod unready\/b-fine: SPDY over WebSocket: yes; per-stream WebSocket v4: yes; legacy SPDY: yes$/);
  });

  test('a page of pods that do not run before the one that does: the running one is asked', async () => {
    const check = (await doctor('crowded')).get('port-forward');
    assert.equal(check.status, 'ok', check.detail);
    assert.match(check.detail, /^pod crowded\/z-fine: SPDY over WebSocket: yes; /);
  });

  test('every pod refused by its kubelet: the check fails naming the kubelets and nodes first', async () => {
    const r = await doctor('all-lost');
    const check = r.get('port-forward');
    assert.equal(check.status, 'fail', check.detail);
    assert.match(check.detail, /^pod all-lost\/b-lost: .*HTTP 404: pod does not exist.*; passed over, .*all-lost\/a-lost \(HTTP 404: pod does not exist\)$/);
    assert.match(check.fix ?? '', /^every pod asked was refused with 404 or 5xx: pods their kubelet no longer has, .*kubectl get nodes/);
    assert.equal(r.code, 1);
  });
});
