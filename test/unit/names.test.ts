import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseClusterName, isUnderClusterDomain, normalizeName } from '../../src/routes/guest-cluster/names.js';

const parse = (h: string) => parseClusterName(h, 'cluster.local', 'team');

test('service name forms resolve to the same Service', () => {
  const expected = { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false };
  for (const h of ['web.shop.svc', 'web.shop.svc.cluster.local', 'web.shop.svc.cluster.local.', 'WEB.Shop.SVC.cluster.local']) {
    assert.deepEqual(parse(h), expected, h);
  }
  assert.deepEqual(parse('web.shop'), { ...expected, namespaceNeedsCheck: true });
  assert.deepEqual(parse('web.shop.'), { ...expected, namespaceNeedsCheck: true });
});

test('a single label is a Service in the default namespace', () => {
  assert.deepEqual(parse('web'), { kind: 'service', service: 'web', namespace: 'team', namespaceNeedsCheck: false });
});

test('headless pod hostnames and pod A records', () => {
  assert.deepEqual(parse('db-0.db.shop.svc.cluster.local'), { kind: 'pod-hostname', hostname: 'db-0', service: 'db', namespace: 'shop' });
  assert.deepEqual(parse('db-0.db.shop.svc'), { kind: 'pod-hostname', hostname: 'db-0', service: 'db', namespace: 'shop' });
  assert.deepEqual(parse('127-10-0-5.shop.pod.cluster.local'), { kind: 'pod-ip', ip: '127.10.0.5', namespace: 'shop' });
  assert.equal(parse('999-10-0-5.shop.pod.cluster.local'), undefined);
});

test('names outside the cluster are not cluster names', () => {
  for (const h of ['www.example.com', 'a.b.c', 'cluster.local', 'x.y.z.svc.other', '']) assert.equal(parse(h), undefined, h);
  // Two labels are only *possibly* a Service: the caller must check the namespace exists.
  assert.equal(parse('example.com')?.kind, 'service');
  assert.equal((parse('example.com') as { namespaceNeedsCheck: boolean }).namespaceNeedsCheck, true);
});

test('malformed names never parse', () => {
  for (const h of ['..', 'a..b', 'web\u0000.shop', `${'a'.repeat(64)}.shop.svc`, 'a'.repeat(300), 'we b.shop', '-web.shop.svc']) {
    assert.equal(parse(h), undefined, JSON.stringify(h));
  }
  assert.equal(normalizeName('Foo.Bar.'), 'foo.bar');
});

test('the cluster domain is configurable', () => {
  assert.deepEqual(parseClusterName('web.shop.svc.corp.internal', 'corp.internal', 'default'), {
    kind: 'service',
    service: 'web',
    namespace: 'shop',
    namespaceNeedsCheck: false,
  });
  assert.equal(parseClusterName('web.shop.svc.cluster.local', 'corp.internal', 'default'), undefined);
});

test('isUnderClusterDomain claims names the cluster owns even when nothing matches', () => {
  assert.equal(isUnderClusterDomain('nope.cluster.local', 'cluster.local'), true);
  assert.equal(isUnderClusterDomain('x.y.svc', 'cluster.local'), true);
  assert.equal(isUnderClusterDomain('example.com', 'cluster.local'), false);
});

test('parseRouteName: the cluster forms under a route name, plus <svc>.<ns>.<route>', async () => {
  const { parseRouteName } = await import('../../src/routes/guest-cluster/names.js');
  assert.deepEqual(parseRouteName('web.shop.svc.prod', 'prod'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  assert.deepEqual(parseRouteName('Web.Shop.Prod.', 'prod'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  assert.deepEqual(parseRouteName('db-0.db.shop.svc.prod.eu', 'prod.eu'), { kind: 'pod-hostname', hostname: 'db-0', service: 'db', namespace: 'shop' });
  assert.deepEqual(parseRouteName('10-1-2-3.shop.pod.prod', 'prod'), { kind: 'pod-ip', ip: '10.1.2.3', namespace: 'shop' });
  for (const h of ['web.prod', 'a.b.c.prod', 'web.svc.prod', 'web.shop.svc.staging', 'web.shop.aprod', 'prod'])
    assert.equal(parseRouteName(h, 'prod'), undefined, h);
});
