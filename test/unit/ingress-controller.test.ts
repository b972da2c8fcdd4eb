import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slimService } from '../../src/cluster/slim.js';
import {
  detectIngressController,
  ingressDestination,
  ingressTarget,
  isIngressClaim,
  KNOWN_INGRESS_CONTROLLERS,
  serviceLookup,
  type ServiceSummary,
} from '../../src/routes/cluster/ingress-controller.js';
import { RouteMatcher, type Claim } from '../../src/routing/table.js';
import type { RoutingTable } from '../../src/routing/table-spec.js';
import { NoReadyEndpointError, ConnectionRefusedError, replyFor } from '../../src/core/errors.js';
import { ingressHostsOf, routeHostsOf } from '../../src/cluster/ingress-hosts.js';
import { ROUTE_CLASS, ingressClassInfoOf, ingressClassOf, type IngressClassInfo } from '../../src/cluster/ingress-classes.js';

const lookup = (services: Record<string, ServiceSummary>) => (ns: string, name: string) => services[`${ns}/${name}`];

test('detection: the configured controller wins, else the first known Service the cluster has', () => {
  const cluster = lookup({
    'kube-system/traefik': { ports: [80, 443] },
    'ingress-nginx/ingress-nginx-controller': { ports: [80, 443], type: 'LoadBalancer' },
    'custom/router': { ports: [8080] },
  });
  assert.deepEqual(detectIngressController({ domains: [], controller: 'custom/router' }, cluster), {
    found: true,
    namespace: 'custom',
    service: 'router',
    how: 'configured',
    ports: [8080],
  });
  // Configured but not in the cache (per-namespace watching): taken as given, ports unknown.
  assert.deepEqual(detectIngressController({ domains: [], controller: 'other/gw' }, cluster), {
    found: true,
    namespace: 'other',
    service: 'gw',
    how: 'configured',
    ports: undefined,
  });
  // ingress-nginx comes before kube-system/traefik in the documented order.
  assert.deepEqual(detectIngressController(undefined, cluster), {
    found: true,
    namespace: 'ingress-nginx',
    service: 'ingress-nginx-controller',
    how: 'detected',
    ports: [80, 443],
  });
  assert.deepEqual(detectIngressController({ domains: ['*.apps.x'] }, lookup({ 'kube-system/traefik': { ports: [80] } })), {
    found: true,
    namespace: 'kube-system',
    service: 'traefik',
    how: 'detected',
    ports: [80],
  });
  // OpenShift's router is first.
  const openshift = lookup({ 'openshift-ingress/router-default': { ports: [80, 443] }, 'ingress-nginx/ingress-nginx-controller': { ports: [80] } });
  assert.equal((detectIngressController(undefined, openshift) as { service: string }).service, 'router-default');
  // A bare-metal OpenShift router (host network) has only its internal ClusterIP Service.
  const bareMetal = lookup({ 'openshift-ingress/router-internal-default': { ports: [80, 443, 1936] } });
  assert.equal((detectIngressController(undefined, bareMetal) as { service: string }).service, 'router-internal-default');
  // An ExternalName Service of a known name is no controller.
  assert.equal(detectIngressController(undefined, lookup({ 'traefik/traefik': { ports: [], type: 'ExternalName' } })).found, false);
});

test('detection: nothing found names every Service looked for and the config key', () => {
  const r = detectIngressController(undefined, () => undefined);
  assert.equal(r.found, false);
  const message = (r as { message: string }).message;
  for (const c of KNOWN_INGRESS_CONTROLLERS) assert.ok(message.includes(`${c.namespace}/${c.service}`), c.service);
  assert.match(message, /set ingress\.controller/);
  assert.equal(detectIngressController({ domains: [], controller: 'no-slash' }, () => undefined).found, false);
});

test('serviceLookup summarizes Services (as the cache keeps them): TCP ports and type', () => {
  const svc = slimService({
    metadata: { namespace: 'n', name: 's' },
    spec: { type: 'NodePort', ports: [{ port: 80 }, { port: 443, protocol: 'TCP' }, { port: 53, protocol: 'UDP' }] },
  })!;
  const l = serviceLookup((ns, name) => (ns === 'n' && name === 's' ? svc : undefined));
  assert.deepEqual(l('n', 's'), { ports: [80, 443], type: 'NodePort' });
  assert.equal(l('n', 'x'), undefined);
});

const table: RoutingTable = {
  clusterDomain: 'cluster.local',
  defaultRoute: 'prod',
  routes: [
    { name: 'prod', kind: 'cluster', context: 'prod', include: [], exclude: [], cidrs: [], origin: 'test', ingress: { domains: ['*.apps.prod.example.com'] } },
  ],
};

function claimFor(matcher: RouteMatcher, host: string): Claim {
  const d = matcher.matchHost(host);
  assert.ok(d.claimed, host);
  return d;
}

test('ingressTarget: an ingress claim goes to the controller Service at the same port', () => {
  const matcher = new RouteMatcher(table);
  matcher.setIngressHosts('prod', ['console.ocp.example.com']);
  const detected = detectIngressController(undefined, lookup({ 'openshift-ingress/router-default': { ports: [80, 443] } }));
  for (const [host, reason] of [
    ['shop.apps.prod.example.com', 'ingress'],
    ['console.ocp.example.com', 'ingress-host'],
  ] as const) {
    const claim = claimFor(matcher, host);
    assert.equal(claim.reason, reason);
    assert.ok(isIngressClaim(claim));
    for (const port of [80, 443]) {
      const t = ingressTarget(claim, port, detected);
      assert.deepEqual({ ...t, label: undefined }, { namespace: 'openshift-ingress', service: 'router-default', port, label: undefined });
      assert.equal(t.label, `ingress host ${host}:${port} (route prod) via service openshift-ingress/router-default:${port}`);
      assert.deepEqual(ingressDestination(t, 'cluster.local'), { type: 'domain', host: 'router-default.openshift-ingress.svc.cluster.local', port });
    }
  }
});

test('ingressTarget: no controller is a 503/host-unreachable naming ingress.controller; a missing port is refused', () => {
  const matcher = new RouteMatcher(table);
  const claim = claimFor(matcher, 'x.apps.prod.example.com');
  const none = detectIngressController(undefined, () => undefined);
  assert.throws(
    () => ingressTarget(claim, 443, none),
    (err: unknown) => {
      assert.ok(err instanceof NoReadyEndpointError);
      assert.match(err.message, /^ingress host x\.apps\.prod\.example\.com:443 \(route prod\): no ingress controller Service found .*set ingress\.controller/);
      assert.equal(replyFor(err).http, 503);
      return true;
    },
  );
  const only80 = detectIngressController(undefined, lookup({ 'ingress-nginx/ingress-nginx-controller': { ports: [80] } }));
  assert.throws(
    () => ingressTarget(claim, 443, only80),
    (err: unknown) => err instanceof ConnectionRefusedError && /has no TCP port 443 \(ports: 80\)/.test(err.message),
  );
  const service = claimFor(matcher, 'web.shop.svc.cluster.local');
  assert.equal(isIngressClaim(service), false);
  assert.throws(() => ingressTarget(service, 80, only80), /not by an ingress rule/);
});

test('host extraction: Ingress rules and TLS hosts, Route hosts (wildcard policy Subdomain)', () => {
  assert.deepEqual(
    ingressHostsOf({
      spec: { rules: [{ host: 'A.example.com.' }, {}, { host: '*.w.example.com' }], tls: [{ hosts: ['a.example.com', 'tls-only.example.com'] }, {}] },
    }).sort(),
    ['*.w.example.com', 'a.example.com', 'tls-only.example.com'],
  );
  assert.deepEqual(ingressHostsOf({ spec: { defaultBackend: {} } }), []);
  assert.deepEqual(ingressHostsOf({ spec: { rules: 'garbage', tls: [{ hosts: [7, 'bad host'] }] } }), []);
  // Never this machine's names, never IP literals.
  assert.deepEqual(
    ingressHostsOf({ spec: { rules: [{ host: 'localhost' }, { host: 'app.localhost' }, { host: '10.0.0.1' }, { host: '::1' }, { host: 'ok.example.com' }] } }),
    ['ok.example.com'],
  );
  assert.deepEqual(routeHostsOf({ spec: { host: 'console.apps.x.com' } }), ['console.apps.x.com']);
  assert.deepEqual(routeHostsOf({ spec: { host: 'wild.apps.x.com', wildcardPolicy: 'Subdomain' } }), ['wild.apps.x.com', '*.apps.x.com']);
  assert.deepEqual(routeHostsOf({ spec: {} }), []);
});

test('a wildcard over a whole top-level domain is never learnt: an Ingress cannot take every .com name', () => {
  // The Ingress API accepts "*.com"; whoever may create an Ingress would have every .com name.
  assert.deepEqual(ingressHostsOf({ spec: { rules: [{ host: '*.com' }, { host: '*.example.com' }], tls: [{ hosts: ['*.io'] }] } }), ['*.example.com']);
  assert.deepEqual(routeHostsOf({ spec: { host: 'shop.com', wildcardPolicy: 'Subdomain' } }), ['shop.com']);
  // In the routing table (and so the PAC file): a .com name stays unclaimed, as without the Ingress.
  const matcher = new RouteMatcher(table);
  matcher.setIngressHosts('prod', [
    ...ingressHostsOf({ spec: { rules: [{ host: '*.com' }] } }),
    ...routeHostsOf({ spec: { host: 'x.com', wildcardPolicy: 'Subdomain' } }),
  ]);
  assert.equal(matcher.matchHost('www.google.com').claimed, false);
  assert.equal(matcher.matchHost('a.b.example.com').claimed, false);
});

test('several controllers: the class of the host picks one; classes it cannot place leave the first', () => {
  const cluster = lookup({
    'openshift-ingress/router-default': { ports: [80, 443] },
    'ingress-nginx/ingress-nginx-controller': { ports: [80, 443] },
    'kube-system/traefik': { ports: [80, 443] },
  });
  const classes = new Map<string, IngressClassInfo>([
    ['nginx', { name: 'nginx', controller: 'k8s.io/ingress-nginx', isDefault: true }],
    ['traefik', { name: 'traefik', controller: 'traefik.io/ingress-controller', isDefault: false }],
  ]);
  const via = (classNames: string[], table: Map<string, IngressClassInfo> | null = classes) => {
    const d = detectIngressController(undefined, cluster, { host: 'h.example.test', classes: classNames, ...(table ? { ingressClasses: table } : {}) });
    return d.found ? `${d.namespace}/${d.service}` : d.message;
  };
  assert.equal(via(['traefik']), 'kube-system/traefik');
  assert.equal(via(['']), 'ingress-nginx/ingress-nginx-controller', 'no class: the default class');
  assert.equal(via([ROUTE_CLASS]), 'openshift-ingress/router-default', 'a Route: the OpenShift router');
  assert.equal(via(['nginx', 'unknown']), 'ingress-nginx/ingress-nginx-controller', 'an unknown class beside a known one');
  // Nothing says which: the first found, as with one controller.
  assert.equal(via(['unknown']), 'openshift-ingress/router-default');
  assert.equal(via(['traefik'], null), 'openshift-ingress/router-default', 'IngressClasses not readable');
  const twoDefaults = new Map(classes);
  twoDefaults.set('traefik', { ...classes.get('traefik')!, isDefault: true });
  assert.equal(via([''], twoDefaults), 'openshift-ingress/router-default', 'two default classes: none is the default');
  assert.match(
    via(['nginx', 'traefik']),
    /served by different ingress controllers \(class "nginx": ingress-nginx\/ingress-nginx-controller; class "traefik": kube-system\/traefik\)/,
  );
  const internal = new Map(classes).set('internal', { name: 'internal', controller: 'k8s.io/internal-ingress-nginx', isDefault: false });
  assert.match(via(['internal'], internal), /^class "internal" \(controller k8s\.io\/internal-ingress-nginx\): no ingress controller Service found for it/);
  // The configured controller serves every class.
  const configured = detectIngressController({ domains: [], controller: 'a/b' }, cluster, { host: 'h', classes: ['internal'], ingressClasses: internal });
  assert.equal(configured.found && `${configured.namespace}/${configured.service}`, 'a/b');
});

test('the class of an Ingress: ingressClassName, else the legacy annotation; IngressClass default annotation', () => {
  assert.equal(ingressClassOf({ spec: { ingressClassName: 'traefik' } }), 'traefik');
  assert.equal(ingressClassOf({ metadata: { annotations: { 'kubernetes.io/ingress.class': 'nginx' } }, spec: {} }), 'nginx');
  assert.equal(ingressClassOf({ spec: {} }), '');
  assert.deepEqual(
    ingressClassInfoOf({ metadata: { name: 'a', annotations: { 'ingressclass.kubernetes.io/is-default-class': 'true' } }, spec: { controller: 'x/y' } }),
    {
      name: 'a',
      controller: 'x/y',
      isDefault: true,
    },
  );
  assert.equal(ingressClassInfoOf({ metadata: { name: 'a', annotations: { 'ingressclass.kubernetes.io/is-default-class': 'yes' } } }).isDefault, false);
});
