// doctor's check of the managed proxies (doctor/local.ts checkDaemons): a route that does not
// serve is named, and the fix is a line to paste.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkDaemons } from '../../src/doctor/local.js';
import type { ProxyStatus } from '../../src/managed/status.js';
import type { RouteStatus } from '../../src/routes/route.js';
import { proxyStatusFixture } from '../helpers/proxy-status.js';

function running(routes: RouteStatus[]): ProxyStatus {
  return proxyStatusFixture({ id: 'abc12345', pid: 4242, routes });
}

test('a degraded cluster route: the fix names its context in a kubectl line to paste, not "…"', () => {
  const [check] = checkDaemons([
    running([
      { name: 'prod', kind: 'cluster', state: 'degraded', reason: 'readyz check failed: etcd', details: { context: "it's prod" } },
      { name: 'jump', kind: 'ssh', state: 'degraded', reason: 'connection refused' },
    ]),
  ]);
  assert.equal(check!.status, 'warn');
  assert.match(check!.detail, /route prod degraded: readyz check failed: etcd; route jump degraded: connection refused/);
  assert.equal(
    check!.fix,
    `check that the API server answers (\`kubectl --context 'it'\\''s prod' get --raw /readyz\`); see \`kubectl proxyout logs abc12345\``,
  );
});

test("a daemon's route: the kubectl line names the kubeconfig it runs from, not the user's default", () => {
  const kubeconfig = '/home/me/.local/state/kubectl-proxyout/proxies/abc12345/kube config';
  const [check] = checkDaemons([running([{ name: 'prod', kind: 'cluster', state: 'error', reason: 'refused', details: { context: 'prod', kubeconfig } }])]);
  assert.equal(
    check!.fix,
    `check that the API server answers (\`kubectl --kubeconfig '${kubeconfig}' --context prod get --raw /readyz\`); see \`kubectl proxyout logs abc12345\``,
  );
});

test('only ssh or konnectivity routes in trouble: no kubectl line, the log', () => {
  const [check] = checkDaemons([running([{ name: 'jump', kind: 'ssh', state: 'degraded', reason: 'connection refused' }])]);
  assert.equal(check!.fix, 'see `kubectl proxyout logs abc12345`');
});

test('a running daemon that does not answer on its control socket fails, with how to stop it', () => {
  const [check] = checkDaemons([proxyStatusFixture({ id: 'abc12345', pid: 4242, answering: false, openStreams: null })]);
  assert.equal(check!.status, 'fail');
  assert.match(check!.detail, /does not answer on its control socket/);
  assert.match(check!.fix!, /kubectl proxyout disconnect abc12345/);
  // Answering with no figures yet (nothing counted) is not that.
  assert.notEqual(checkDaemons([proxyStatusFixture({ id: 'abc12345', pid: 4242, answering: true, openStreams: null })])[0]!.status, 'fail');
});
