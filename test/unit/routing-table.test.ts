import { test } from 'node:test';
import assert from 'node:assert/strict';
import { destinationFor } from '../../src/core/address.js';
import { NotAllowedError, SocksReply } from '../../src/core/errors.js';
import { RouteMatcher, refusalError, type Claim, type Decision, type Refusal } from '../../src/routing/table.js';
import type { ClusterView } from '../../src/routes/route.js';
import { RoutingTableError } from '../../src/routing/suffix-index.js';
import type { RoutingTable } from '../../src/routing/table-spec.js';
import type { RouteSpec } from '../../src/routes/spec.js';
import {
  MULTI_DECISIONS,
  MULTI_INGRESS_DECISIONS,
  MULTI_YAML,
  PROD_NAMESPACES,
  EXCLUDE_INCLUDE_DECISIONS,
  EXCLUDE_INCLUDE_YAML,
  fixedView,
  tableFromYaml,
  withIngressHosts,
  type Decision as DecisionRow,
} from '../helpers/routing-decisions.js';

const views = (entries: Record<string, ClusterView>) => new Map(Object.entries(entries));
const multi = (direct?: boolean, extra: Record<string, ClusterView> = {}) =>
  new RouteMatcher(tableFromYaml(MULTI_YAML, direct), views({ prod: fixedView([], PROD_NAMESPACES, 'shop'), staging: fixedView([], ['shop']), ...extra }));

function claimOf(d: Decision, host: string): Claim {
  assert.equal(d.claimed, true, `${host} should be claimed, got: ${d.claimed ? '' : d.message}`);
  return d as Claim;
}

/** Checks every decision, with direct pass-through on (unclaimed → the direct route) and off (refused). */
function checkDecisions(matcher: RouteMatcher, decisions: DecisionRow[], direct: boolean): void {
  for (const { host, route, refused } of decisions) {
    const d = matcher.matchHost(host);
    if (refused) assert.equal(d.claimed, false, `${host} should be refused whatever direct says, got route ${(d as Claim).route?.name}`);
    else if (route !== undefined) assert.equal(claimOf(d, host).route.name, route, host);
    else if (direct) assert.equal(claimOf(d, host).reason, 'direct', host);
    else assert.equal(d.claimed, false, `${host} should be refused, got route ${(d as Claim).route?.name}`);
  }
}

test('an exclude/include table decides longest suffix first, exclusions beating inclusions of the same length', () => {
  // The cluster knows its namespaces (none called "ch" or "net"), so two-label names are not its short names.
  const cluster = views({ bettersmarter: fixedView([], ['default']) });
  checkDecisions(new RouteMatcher(tableFromYaml(EXCLUDE_INCLUDE_YAML), cluster), EXCLUDE_INCLUDE_DECISIONS, false);
  checkDecisions(new RouteMatcher(tableFromYaml(EXCLUDE_INCLUDE_YAML, true), cluster), EXCLUDE_INCLUDE_DECISIONS, true);
});

test('several clusters, includes, ingress domains, direct and reject routes, IP blocks', () => {
  checkDecisions(multi(true), MULTI_DECISIONS, true);
  checkDecisions(multi(false), MULTI_DECISIONS, false);
});

test('an IPv4 address sent as a name in another spelling meets the IP rules (a reject block is not bypassed)', () => {
  const m = multi(true);
  for (const spelling of ['3405803777', '203.28929', '0xcb.0.0x71.1', '0313.0.0161.01']) {
    const d = m.match(destinationFor(spelling, 80));
    assert.deepEqual([claimOf(d, spelling).route.name, (d as Claim).reason, (d as Claim).host], ['blocked', 'cidr', '203.0.113.1'], spelling);
  }
});

test('claims carry the parsed cluster name, so routes never parse it again', () => {
  const m = multi(false);
  const name = (host: string) => claimOf(m.matchHost(host), host).name;
  assert.deepEqual(name('web.shop.svc.staging'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  assert.deepEqual(name('Web.Shop.Prod.'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  assert.deepEqual(name('db-0.db.shop.svc.prod'), { kind: 'pod-hostname', hostname: 'db-0', service: 'db', namespace: 'shop' });
  assert.deepEqual(name('10-244-1-7.shop.pod.prod'), { kind: 'pod-ip', ip: '10.244.1.7', namespace: 'shop' });
  assert.deepEqual(name('web.shop.svc.cluster.local'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  // Short names use the default cluster's namespace; "svc.ns" keeps its check for the resolver.
  assert.deepEqual(name('web'), { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false });
  assert.deepEqual(name('web.monitoring'), { kind: 'service', service: 'web', namespace: 'monitoring', namespaceNeedsCheck: true });
  // Under a route's name but no cluster form: claimed (the route says "no such Service"), no name.
  const odd = claimOf(m.matchHost('a.b.c.d.prod'), 'a.b.c.d.prod');
  assert.equal(odd.route.name, 'prod');
  assert.equal(odd.name, undefined);
  assert.equal(odd.reason, 'route-name');
  // Under a cluster route's include: a Service or Pod form names one (svc.ns when ns exists);
  // any other name is a host of the cluster's web apps, for its ingress controller.
  const inc = claimOf(m.matchHost('API.prod.example.com.'), 'api');
  assert.deepEqual([inc.reason, inc.pattern, inc.host, inc.name], ['ingress', 'prod.example.com', 'api.prod.example.com', undefined]);
  const svc = claimOf(m.matchHost('web.shop.prod.example.com'), 'web.shop');
  assert.deepEqual([svc.reason, svc.name], ['include', { kind: 'service', service: 'web', namespace: 'shop', namespaceNeedsCheck: false }]);
  assert.equal(claimOf(m.matchHost('web.nowhere.prod.example.com'), 'no such namespace').reason, 'ingress');
  assert.deepEqual(claimOf(m.matchHost('web.nowhere.svc.prod.example.com'), 'explicit').name, {
    kind: 'service',
    service: 'web',
    namespace: 'nowhere',
    namespaceNeedsCheck: false,
  });
  assert.equal(claimOf(m.matchHost('db-0.db.shop.svc.prod.example.com'), 'pod').name?.kind, 'pod-hostname');
  const ing = claimOf(m.matchHost('console.apps.prod.example.com'), 'console');
  assert.deepEqual([ing.reason, ing.pattern], ['ingress', '*.apps.prod.example.com']);
});

test('an exclude only takes its own route out: the name falls to a shorter rule of another route', () => {
  const m = new RouteMatcher(
    tableFromYaml(`
routes:
  - { name: wide, kind: cluster, include: [example.com] }
  - { name: narrow, kind: cluster, include: [shop.example.com], exclude: [legacy.shop.example.com, "*.tmp.shop.example.com"] }
  - { name: exact, kind: cluster, include: [a.b.example.com], exclude: [a.b.example.com] }
  - { name: longer-exclude, kind: cluster, include: [c.example.com], exclude: [x.c.example.com] }
  - { name: longer-include, kind: cluster, include: [y.d.example.com], exclude: [d.example.com] }
`),
  );
  const route = (h: string) => claimOf(m.matchHost(h), h).route.name;
  assert.equal(route('web.shop.example.com'), 'narrow');
  assert.equal(route('legacy.shop.example.com'), 'wide');
  assert.equal(route('a.legacy.shop.example.com'), 'wide');
  assert.equal(route('tmp.shop.example.com'), 'narrow'); // the wildcard does not match its own base
  assert.equal(route('x.tmp.shop.example.com'), 'wide');
  assert.equal(route('a.b.example.com'), 'wide'); // same length: the exclude wins
  assert.equal(route('x.c.example.com'), 'wide'); // a longer exclude beats the shorter include
  assert.equal(route('c.example.com'), 'longer-exclude');
  assert.equal(route('y.d.example.com'), 'longer-include'); // a longer include beats the exclude
  assert.equal(route('z.d.example.com'), 'wide');
});

test('a refusal says which excludes applied; refusals map to SOCKS 0x02 / HTTP 403', () => {
  const d = new RouteMatcher(tableFromYaml(EXCLUDE_INCLUDE_YAML), views({ bettersmarter: fixedView([], []) })).matchHost(
    'apps.c-bettersmarter-prod01.vshnmanaged.net',
  );
  assert.equal(d.claimed, false);
  if (d.claimed) return;
  assert.match(d.message, /excluded from route bettersmarter by "apps\.c-bettersmarter-prod01\.vshnmanaged\.net"/);
  const err = refusalError(d);
  assert.ok(err instanceof NotAllowedError);
  assert.equal(err.socksReply, SocksReply.notAllowed);
  assert.equal(err.httpStatus, 403);
});

test('IPs the clusters know: one knower claims it, two are refused naming both, a CIDR settles it', () => {
  const m = multi(true, {
    prod: fixedView(['10.244.0.5', '10.250.0.1', 'fd00:244::5'], PROD_NAMESPACES),
    staging: fixedView(['10.245.0.9', '10.250.0.1', '10.96.0.10'], ['shop']),
  });
  const c = (h: string) => claimOf(m.matchHost(h), h);
  assert.deepEqual([c('10.244.0.5').route.name, c('10.244.0.5').reason], ['prod', 'known-ip']);
  assert.equal(c('10.245.0.9').route.name, 'staging');
  assert.equal(c('::ffff:10.245.0.9').route.name, 'staging');
  assert.equal(c('::ffff:10.245.0.9').host, '10.245.0.9');
  assert.equal(c('fd00:244:0::5').route.name, 'prod');
  const both = m.matchHost('10.250.0.1');
  assert.equal(both.claimed, false);
  assert.match((both as { message: string }).message, /10\.250\.0\.1 is known to clusters prod and staging/);
  // staging knows 10.96.0.10 too, but prod's CIDR is consulted first.
  assert.deepEqual([c('10.96.0.10').route.name, c('10.96.0.10').reason, c('10.96.0.10').pattern], ['prod', 'cidr', '10.96.0.0/12']);
  assert.equal(c('10.9.9.9').reason, 'direct');
  // Destinations as the listeners build them.
  assert.equal(claimOf(m.match(destinationFor('::ffff:10.244.0.5', 80)), 'mapped').route.name, 'prod');
  assert.equal(m.match(destinationFor('fe80::1%eth0', 80)).claimed, false);
});

test('"svc.ns" short names: absent namespaces fall through, unknown ones are claimed with a fallback', () => {
  const unknown = new RouteMatcher(tableFromYaml(MULTI_YAML, true), views({ prod: fixedView([], undefined) }));
  const d = claimOf(unknown.matchHost('example.com'), 'example.com');
  assert.deepEqual([d.route.name, d.reason], ['prod', 'short-name']);
  assert.equal(d.fallback?.claimed, true);
  assert.equal((d.fallback as Claim).reason, 'direct');
  const off = new RouteMatcher(tableFromYaml(MULTI_YAML, false), views({ prod: fixedView([], undefined) }));
  assert.equal(claimOf(off.matchHost('example.com'), 'example.com').fallback?.claimed, false);
  // Single labels need no namespace check and get no fallback.
  assert.equal(claimOf(unknown.matchHost('web'), 'web').fallback, undefined);
});

test('a StatefulSet peer\'s short name (mysql-0.mysql, mysql-0.mysql.shop) is the pod cluster DNS names, before "svc.ns"', () => {
  // Service mysql in shop has a ready endpoint with hostname mysql-0; Service other in shop one named web.
  const peers = new Set(['shop/mysql/mysql-0', 'shop/other/web']);
  const view: ClusterView = { ...fixedView([], ['shop', 'other'], 'shop'), namesPodHostname: (ns, svc, host) => peers.has(`${ns}/${svc}/${host}`) };
  for (const direct of [true, false]) {
    const m = new RouteMatcher(tableFromYaml(MULTI_YAML, direct), views({ prod: view }));
    for (const host of ['mysql-0.mysql', 'mysql-0.mysql.shop', 'MySQL-0.mysql.']) {
      const d = claimOf(m.matchHost(host), host);
      assert.deepEqual([d.route.name, d.reason, d.fallback], ['prod', 'short-name', undefined], host);
      assert.deepEqual(d.name, { kind: 'pod-hostname', hostname: 'mysql-0', service: 'mysql', namespace: 'shop' }, host);
    }
    // A pod's search path tries <ns>.svc.<zone> first: the peer wins over Service web in namespace other.
    assert.equal(claimOf(m.matchHost('web.other'), 'web.other').name?.kind, 'pod-hostname');
    // No such peer: as before, "svc.ns" in a namespace that exists, else not a cluster name.
    assert.deepEqual(claimOf(m.matchHost('api.other'), 'api.other').name, { kind: 'service', service: 'api', namespace: 'other', namespaceNeedsCheck: true });
    const unnamed = m.matchHost('mysql-1.mysql.shop');
    assert.ok(unnamed.claimed ? unnamed.reason === 'direct' : !direct, 'a peer DNS does not name is left to the rules below');
  }
});

test('"." and 0.0.0.0/0 are catch-alls, consulted after short names and the clusters\' known IPs', () => {
  const m = new RouteMatcher(
    tableFromYaml(`
routes:
  - { name: prod, kind: cluster, include: [prod.example.com] }
  - { name: internet, kind: direct, include: ["."], cidrs: [0.0.0.0/0, "::/0"] }
  - { name: no-ads, kind: reject, include: [ads.example.com] }
`),
    views({ prod: fixedView(['10.244.0.5'], ['shop']) }),
  );
  const c = (h: string) => claimOf(m.matchHost(h), h);
  assert.deepEqual([c('www.example.com').route.name, c('www.example.com').pattern], ['internet', '.']);
  assert.equal(c('web').route.name, 'prod');
  assert.equal(c('web.shop').route.name, 'prod');
  assert.equal(c('x.prod.example.com').route.name, 'prod');
  assert.equal(c('ads.example.com').route.name, 'no-ads');
  assert.equal(c('10.244.0.5').route.name, 'prod');
  assert.deepEqual([c('10.1.1.1').route.name, c('10.1.1.1').pattern], ['internet', '0.0.0.0/0']);
  assert.equal(c('2001:db8::1').route.name, 'internet');
});

test('two routes claiming the same suffix, name or CIDR make the table invalid', () => {
  const cluster = (name: string, extra: Partial<RouteSpec> = {}): RouteSpec =>
    ({ kind: 'cluster', name, context: name, include: [], exclude: [], cidrs: [], origin: `t:${name}`, ...extra }) as RouteSpec;
  const build = (routes: RouteSpec[]) => () =>
    new RouteMatcher({ routes, defaultRoute: routes[0]!.name, clusterDomain: 'cluster.local' } satisfies RoutingTable);
  assert.throws(
    build([cluster('a', { include: ['x.com'] }), cluster('b', { include: ['X.com.'] })]),
    (e: Error) => e instanceof RoutingTableError && /routes a \(t:a\) and b \(t:b\) both claim "x\.com"/.test(e.message),
  );
  assert.throws(build([cluster('a'), cluster('b', { include: ['a'] })]), /both claim "a"/);
  assert.throws(build([cluster('a'), cluster('b', { include: ['cluster.local'] })]), /both claim "cluster\.local"/);
  assert.throws(build([cluster('a', { cidrs: ['10.0.0.0/8'] }), cluster('b', { cidrs: ['10.0.0.0/8'] })]), /a \(t:a\) and b \(t:b\) both claim 10\.0\.0\.0\/8/);
  // Same suffix in include and exclude of different routes, nested blocks, and a wildcard next to
  // a literal of the same length are all fine.
  build([cluster('a', { include: ['x.com'], cidrs: ['10.0.0.0/8'] }), cluster('b', { exclude: ['x.com'], include: ['*.x.com'], cidrs: ['10.1.0.0/16'] })])();
  // "Exclude it from the other", as the message says, settles it: the route that excludes a name
  // no longer claims it, whatever else it includes.
  build([cluster('a', { exclude: ['cluster.local'] }), cluster('b', { include: ['cluster.local'] })])();
  build([cluster('a', { include: ['x.com'], exclude: ['x.com'] }), cluster('b', { include: ['x.com'] })])();
  build([cluster('a', { include: ['x.com'] }), cluster('b', { include: ['x.com'], exclude: ['x.com'] })])();
  const settled = new RouteMatcher({
    routes: [cluster('a', { exclude: ['cluster.local'] }), cluster('b', { include: ['cluster.local'] })],
    defaultRoute: 'a',
    clusterDomain: 'cluster.local',
  });
  assert.equal(claimOf(settled.matchHost('web.shop.svc.cluster.local'), 'web.shop.svc.cluster.local').route.name, 'b');
  // An exclude that leaves part of the overlap claimed by both still clashes.
  assert.throws(build([cluster('a', { include: ['x.com'], exclude: ['*.x.com'] }), cluster('b', { include: ['x.com'] })]), /both claim "x\.com"/);
});

test('ingress hosts learnt at run time are claimed, replaced, and refused when two clusters serve one', () => {
  const m = multi(true);
  m.setIngressHosts('staging', ['shop.example.io', '*.preview.example.io', 'not a host']);
  const c = (h: string) => claimOf(m.matchHost(h), h);
  assert.deepEqual([c('shop.example.io').route.name, c('shop.example.io').reason], ['staging', 'ingress-host']);
  assert.equal(c('pr-1.preview.example.io').route.name, 'staging');
  assert.equal(c('www.shop.example.io').reason, 'direct');
  m.setIngressHosts('prod', ['shop.example.io']);
  const both = m.matchHost('shop.example.io');
  assert.equal(both.claimed, false);
  assert.match((both as { message: string }).message, /served by both staging and prod|served by both prod and staging/);
  m.setIngressHosts('staging', []);
  assert.equal(c('shop.example.io').route.name, 'prod');
  assert.equal(c('pr-1.preview.example.io').reason, 'direct');
  // Learnt hosts never beat a configured rule (anyone who may create an Ingress names them):
  // not a configured wildcard of the same length, not a shorter configured suffix either.
  m.setIngressHosts('staging', ['console.apps.prod.example.com', 'www.intranet.example.com']);
  assert.equal(c('console.apps.prod.example.com').route.name, 'prod');
  assert.equal(c('other.apps.prod.example.com').route.name, 'prod');
  assert.equal(c('www.intranet.example.com').route.name, 'intranet');
  // Nor the default route's short names: an Ingress host "web" or "*.shop" in staging leaves
  // prod's Service web and namespace shop alone; a name prod does not claim goes to staging.
  m.setIngressHosts('staging', ['web', '*.shop', '*.nowhere']);
  for (const h of ['web', 'web.shop', 'db.shop']) assert.deepEqual([c(h).route.name, c(h).reason], ['prod', 'short-name'], h);
  assert.deepEqual([c('x.nowhere').route.name, c('x.nowhere').reason], ['staging', 'ingress-host']);
});

test('an ingress host two clusters learnt is refused naming both, direct on or off, unless a configured rule decides; the conflicts are listed', () => {
  for (const direct of [true, false]) checkDecisions(withIngressHosts(multi(direct)), MULTI_INGRESS_DECISIONS, direct);
  const m = withIngressHosts(multi(true));
  for (const host of ['shop.example.io', 'pr-1.preview.example.io']) {
    const d = m.matchHost(host);
    assert.equal(d.claimed, false);
    assert.equal(
      (d as Refusal).message,
      `${host} is served by both prod and staging (an Ingress or Route host in each): add it to one route's include to choose`,
    );
    assert.equal(refusalError(d as Refusal).socksReply, SocksReply.notAllowed);
  }
  // Listed (and logged) only where the tie decides: apps.prod.example.com (prod excludes it),
  // console.apps.prod.example.com (prod's ingress domain), www.intranet.example.com (the intranet
  // route's include) and web (a short name) are decided by configured rules, not refused.
  const conflicts = ['*.both.example.io', '*.preview.example.io', 'shop.example.io'];
  assert.deepEqual(
    m.ingressHostConflicts(),
    conflicts.map((host) => ({ host, routes: ['prod', 'staging'] })),
  );
  // A configured rule that names one host under a learnt wildcard leaves the rest of it in conflict.
  const named = new RouteMatcher(
    tableFromYaml(MULTI_YAML.replace('include: [prod.example.com]', 'include: [prod.example.com, shop.example.io, a.preview.example.io]'), true),
    views({ prod: fixedView([], PROD_NAMESPACES, 'shop'), staging: fixedView([], ['shop']) }),
  );
  assert.deepEqual(
    withIngressHosts(named)
      .ingressHostConflicts()
      .map((c) => c.host),
    ['*.both.example.io', '*.preview.example.io'],
  );
  m.setIngressHosts('staging', ['staging-only.example.io']);
  assert.deepEqual(m.ingressHostConflicts(), []);
  assert.equal(claimOf(m.matchHost('shop.example.io'), 'shop.example.io').route.name, 'prod', 'staging no longer serves it');
});

test('with 1,000 routes a decision costs one map probe per label, not a scan of the routes', () => {
  const routes: RouteSpec[] = [];
  for (let i = 0; i < 1000; i++) {
    routes.push({
      kind: 'cluster',
      name: `c${i}`,
      context: `c${i}`,
      include: [`c${i}.example.com`, `*.apps.c${i}.example.net`],
      exclude: [`old.c${i}.example.com`],
      cidrs: [`10.${i >> 8}.${i & 255}.0/24`],
      origin: 't',
    });
  }
  const m = new RouteMatcher({ routes, defaultRoute: 'c0', clusterDomain: 'cluster.local' });
  const index = (m as unknown as { suffixes: { byKey: Map<string, unknown> } }).suffixes;
  let probes = 0;
  const map = index.byKey;
  const get = map.get.bind(map);
  map.get = (key: string) => {
    probes++;
    return get(key);
  };
  assert.equal(claimOf(m.matchHost('web.c777.example.com'), 'x').route.name, 'c777');
  assert.equal(probes, 5); // 4 labels + the root
  probes = 0;
  assert.equal(claimOf(m.matchHost('web.shop.svc.c999'), 'x').route.name, 'c999');
  assert.equal(probes, 5);
  assert.equal(claimOf(m.matchHost('10.3.231.7'), 'x').route.name, 'c999');
});

test('describeRoute: one line per route with what it serves, for startup lines and status', async () => {
  const { describeRoute } = await import('../../src/routing/table-spec.js');
  const t = tableFromYaml(MULTI_YAML, true);
  assert.deepEqual(
    t.routes.map((r) => describeRoute(t, r)),
    [
      'prod (cluster prod-admin, default): <svc>.<ns>.prod, *.cluster.local, *.svc, short names, prod.example.com, not apps.prod.example.com, 10.96.0.0/12, fd00:10:96::/112, ingress *.apps.prod.example.com, ingress shop.example.org',
      'staging (cluster staging): <svc>.<ns>.staging, staging.example.com, *.pages.example.net, 10.96.5.0/24',
      'intranet (direct): intranet.example.com, wiki.staging.example.com, 192.168.0.0/16',
      'blocked (reject): ads.example.com, 203.0.113.0/24',
      'direct (direct): everything no other route claims',
    ],
  );
});

test('a refusal says what the name would have been, and which cluster domain a cluster-form name is under', () => {
  const m = multi(false);
  const message = (host: string) => {
    const d = m.matchHost(host);
    assert.equal(d.claimed, false, host);
    return (d as Refusal).message;
  };
  // It said "is not a cluster name (there is no namespace "com")" for a host outside every cluster.
  assert.match(
    message('example.com'),
    /; cluster route prod: example\.com is no cluster name: as one it would be Service "example" in namespace "com", and there is no namespace "com"$/,
  );
  // A route's name where a namespace goes: its names have the namespace between.
  assert.match(message('web.staging'), /there is no namespace "staging"; under route staging a Service is SERVICE\.NAMESPACE\.staging$/);
  // Written for a cluster with another domain: that domain, this one, and the flag.
  assert.match(
    message('web.shop.svc.corp.local'),
    /; it is a cluster name under "corp\.local", but the cluster domain here is cluster\.local \(--cluster-domain corp\.local if the cluster uses that\)$/,
  );
  assert.match(message('db-0.db.shop.svc.k8s.example'), /under "k8s\.example", but the cluster domain here is cluster\.local/);
  assert.doesNotMatch(message('www.example.org'), /cluster domain/);
});
