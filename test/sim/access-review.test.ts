// The simulator's SelfSubjectAccessReview: 201 with status.allowed by the stand-in RBAC (the rule
// real requests meet), 422 without attributes, 401 without credentials; discovery lists it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { SimCluster } from './cluster.js';
import { request } from './testkit.js';
import { ACCESS_REVIEW_PATH } from './access-review.js';

let sim: SimCluster;
before(async () => {
  sim = await SimCluster.start({ quiet: true });
});
after(async () => {
  await sim.stop();
});

function review(token: string | null, spec: unknown): Promise<{ status: number; body: any }> {
  const text = JSON.stringify({ kind: 'SelfSubjectAccessReview', apiVersion: 'authorization.k8s.io/v1', spec });
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${sim.server}${ACCESS_REVIEW_PATH}`,
      {
        method: 'POST',
        ca: sim.caPem,
        headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

const attrs = (namespace: string, verb: string, resource: string, extra: object = {}) => ({ resourceAttributes: { namespace, verb, resource, ...extra } });

test('cluster-wide identities may do anything; scoped ones only inside their namespaces', async () => {
  const admin = await review(sim.adminToken, attrs('', 'list', 'services'));
  assert.equal(admin.status, 201);
  assert.equal(admin.body.kind, 'SelfSubjectAccessReview');
  assert.equal(admin.body.status.allowed, true);
  assert.deepEqual(admin.body.spec, attrs('', 'list', 'services'));

  const scoped = sim.issueToken({ namespaces: ['shop'] });
  assert.equal((await review(scoped, attrs('', 'list', 'services'))).body.status.allowed, false);
  assert.equal((await review(scoped, attrs('shop', 'watch', 'endpointslices', { group: 'discovery.k8s.io' }))).body.status.allowed, true);
  assert.equal((await review(scoped, attrs('shop', 'create', 'pods', { subresource: 'portforward' }))).body.status.allowed, true);
  assert.equal((await review(scoped, attrs('data', 'create', 'pods', { subresource: 'portforward' }))).body.status.allowed, false);
  assert.equal((await review(scoped, attrs('', 'get', 'namespaces', { name: 'shop' }))).body.status.allowed, true);
  assert.equal((await review(scoped, { nonResourceAttributes: { path: '/version', verb: 'get' } })).body.status.allowed, true);
  assert.equal((await review(scoped, { nonResourceAttributes: { path: '/metrics', verb: 'get' } })).body.status.allowed, false);
});

test('no attributes is 422 Invalid; no credentials is 403 (system:anonymous); GET is 405', async () => {
  const invalid = await review(sim.adminToken, {});
  assert.equal(invalid.status, 422);
  assert.equal(invalid.body.reason, 'Invalid');
  assert.match(invalid.body.message, /exactly one of nonResourceAttributes or resourceAttributes must be specified/);
  const anonymous = await review(null, attrs('', 'list', 'pods'));
  assert.equal(anonymous.status, 403);
  assert.match(anonymous.body.message, /User "system:anonymous" cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io"/);
  assert.equal((await request(sim, ACCESS_REVIEW_PATH)).status, 405);
});

test('discovery lists authorization.k8s.io/v1 selfsubjectaccessreviews', async () => {
  const groups = (await request(sim, '/apis')).json();
  assert.ok(groups.groups.some((g: { name: string }) => g.name === 'authorization.k8s.io'));
  const resources = (await request(sim, '/apis/authorization.k8s.io/v1')).json();
  assert.deepEqual(
    resources.resources.map((r: { name: string; verbs: string[] }) => [r.name, r.verbs]),
    [['selfsubjectaccessreviews', ['create']]],
  );
});
