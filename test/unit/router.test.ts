// The Router over a real matcher and stand-in routes: which route a connection ends on when the
// route that claimed it cannot answer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { destinationFor } from '../../src/core/address.js';
import { ConnectTimeoutError, NotAllowedError, PortForwardForbiddenError, RouteUnavailableError } from '../../src/core/errors.js';
import { RouteMatcher } from '../../src/routing/table.js';
import { LOOKUP_WAIT_MS, Router } from '../../src/routing/router.js';
import type { Route, RouteClaim } from '../../src/routes/route.js';
import { MULTI_YAML, fixedView, tableFromYaml } from '../helpers/routing-decisions.js';

/** A route that opens a PassThrough, or fails with what `fail` gives for the claim. */
function standIn(name: string, fail?: (claim: RouteClaim) => Error | undefined): Route & { opened: string[] } {
  const opened: string[] = [];
  return {
    name,
    kind: 'stand-in',
    opened,
    start: async () => {},
    status: () => ({ name, kind: 'stand-in', state: 'ready' }),
    close: async () => {},
    async open(request, claim) {
      const err = fail?.(claim);
      if (err) throw err;
      opened.push(request.destination.host);
      return { stream: new PassThrough(), via: name };
    },
  };
}

function routerWith(direct: boolean, prodFails: (claim: RouteClaim) => Error | undefined) {
  // prod (the default) cannot tell which namespaces exist: "x.y" names are claimed with a fallback.
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, direct), new Map([['prod', fixedView([], undefined)]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name, name === 'prod' ? prodFails : undefined));
  return { router: new Router({ matcher, routes }, { connectTimeoutMs: 2000 }), routes };
}

const open = (router: Router, host: string) =>
  router.open({ destination: destinationFor(host, 443), frontEnd: 'socks5', client: 'test', signal: new AbortController().signal });

test('the default cluster down: a two-label name it might have owned takes the rules below (direct); its own names fail with its error', async () => {
  const down = () => new RouteUnavailableError('cluster route prod is not available: cannot reach the API server');
  const { router } = routerWith(true, down);
  const viaDirect = await open(router, 'github.com');
  assert.equal(viaDirect.route, 'direct');
  viaDirect.stream.destroy();
  await assert.rejects(open(router, 'web.shop.svc.cluster.local'), RouteUnavailableError);
  await assert.rejects(open(router, 'web'), RouteUnavailableError, 'a single label has no fallback');
  // With nothing below to take it, the cluster's own error says more than "served by no route".
  const { router: noDirect } = routerWith(false, down);
  await assert.rejects(open(noDirect, 'github.com'), /cluster route prod is not available/);
});

test('a namespace the synced cluster does not have: the name falls to the rules below, even a refusal', async () => {
  const noNamespace = (claim: RouteClaim) => (claim.name?.namespace === 'com' ? new NotAllowedError('no namespace com') : undefined);
  const { router } = routerWith(true, noNamespace);
  assert.equal((await open(router, 'github.com')).route, 'direct');
  assert.equal((await open(router, 'web.shop')).route, 'prod');
  const { router: noDirect } = routerWith(false, noNamespace);
  // Refused below too: the answer carries what the cluster route said when it tried first.
  await assert.rejects(
    open(noDirect, 'github.com'),
    (err: Error) => err instanceof NotAllowedError && /not served by any route.*; stand-in route prod: no namespace com$/.test(err.message),
  );
});

test('an IP the cluster knows but refuses (a node IP) goes where it would have gone unknown; not when the cluster is down', async () => {
  const nodeIp = '198.51.100.10';
  const routerFailing = (direct: boolean, err: () => Error) => {
    const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, direct), new Map([['prod', fixedView([nodeIp], undefined)]]));
    const routes = new Map<string, Route>();
    for (const { name } of matcher.snapshot().routes)
      routes.set(name, standIn(name, name === 'prod' ? (claim) => (claim.host === nodeIp ? err() : undefined) : undefined));
    return new Router({ matcher, routes }, { connectTimeoutMs: 2000 });
  };
  const nodeRefusal = () => new NotAllowedError(`${nodeIp} is a node IP (only hostNetwork pods have it)`);
  const viaDirect = await open(routerFailing(true, nodeRefusal), nodeIp);
  assert.equal(viaDirect.route, 'direct');
  viaDirect.stream.destroy();
  // Without a direct route, the cluster's own refusal, which names the opt-in.
  await assert.rejects(open(routerFailing(false, nodeRefusal), nodeIp), /is a node IP/);
  // A cluster that is down: its IPs are not dialled elsewhere, where they may be another network's.
  const down = () => new RouteUnavailableError('cluster route prod is not available');
  await assert.rejects(open(routerFailing(true, down), nodeIp), RouteUnavailableError);
  // A pod found at that IP whose port-forward RBAC refuses: the refusal, never a dial from here.
  const forbidden = () => new PortForwardForbiddenError(`pods "web-0" is forbidden; the proxy needs get and create on pods/portforward`);
  await assert.rejects(open(routerFailing(true, forbidden), nodeIp), PortForwardForbiddenError);
});

test('a Pod IP look-up that takes longer than the connect timeout ends as a timeout, at the timeout', { timeout: 5000 }, async () => {
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, false), new Map([['prod', fixedView([], undefined)]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name));
  // prod's look-up never answers (an API server that stopped responding).
  (routes.get('prod') as Route).learnIp = () => new Promise(() => {});
  const router = new Router({ matcher, routes }, { connectTimeoutMs: 300 });
  const started = Date.now();
  await assert.rejects(
    router.open({ destination: destinationFor('172.16.5.5', 80), frontEnd: 'socks5', client: 'test', signal: new AbortController().signal }),
    ConnectTimeoutError,
  );
  assert.ok(Date.now() - started < 2000, `${Date.now() - started} ms`);
});

test('a timeout names an IPv6 destination in brackets, so its port reads as a port', { timeout: 5000 }, async () => {
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, false), new Map([['prod', fixedView([], undefined)]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name));
  (routes.get('prod') as Route).learnIp = () => new Promise(() => {});
  const router = new Router({ matcher, routes }, { connectTimeoutMs: 100 });
  await assert.rejects(
    router.open({ destination: destinationFor('fd00:99::5', 8080), frontEnd: 'socks5', client: 'test', signal: new AbortController().signal }),
    (e: Error) => e instanceof ConnectTimeoutError && /^could not open a stream to \[fd00:99::5\]:8080 within 100 ms/.test(e.message),
  );
});

test('a Pod IP look-up that does not answer holds an unclaimed IP for LOOKUP_WAIT_MS, not the connect timeout: then it is decided', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, true), new Map([['prod', fixedView([], undefined)]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name));
  // prod's look-up never answers (an API server holding its LISTs): direct traffic must not wait for it.
  (routes.get('prod') as Route).learnIp = () => new Promise(() => {});
  const router = new Router({ matcher, routes }, { connectTimeoutMs: 60_000 });
  let settled = false;
  const opening = open(router, '198.51.100.7').finally(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  t.mock.timers.tick(LOOKUP_WAIT_MS - 1);
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, 'still waiting for the look-up');
  t.mock.timers.tick(1);
  const opened = await opening;
  assert.equal(opened.route, 'direct');
  opened.stream.destroy();
});

test('an IP while a cluster still syncs waits for it: a ClusterIP it then knows goes to it, not direct', async () => {
  let synced = false;
  const view = { defaultNamespace: 'default', knowsIp: (ip: string) => synced && ip === '172.30.7.7', namespaceExists: () => undefined };
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, true), new Map([['prod', view]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name));
  let finishSync!: () => void;
  const syncing = new Promise<void>((resolve) => (finishSync = resolve));
  (routes.get('prod') as Route).whenSettled = () => syncing;
  const router = new Router({ matcher, routes }, { connectTimeoutMs: 5_000 });
  const opening = open(router, '172.30.7.7');
  await new Promise((r) => setTimeout(r, 50));
  synced = true;
  finishSync();
  const opened = await opening;
  assert.equal(opened.route, 'prod');
  opened.stream.destroy();
});

test('an IP refused because a cluster could not say whether it is a Pod IP: the refusal names that cluster and why', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, false), new Map([['prod', fixedView([], undefined)]]));
  const routes = new Map<string, Route>();
  for (const { name } of matcher.snapshot().routes) routes.set(name, standIn(name));
  const router = new Router({ matcher, routes }, { connectTimeoutMs: 60_000 });
  // Its look-up never answers (pooled API connections gone silent).
  (routes.get('prod') as Route).learnIp = () => new Promise(() => {});
  const silent = assert.rejects(open(router, '10.244.1.9'), (e: Error) => {
    assert.match(
      e.message,
      /^10\.244\.1\.9 is in no route's cidrs and no cluster knows it .*; route prod has not answered whether it is a Pod IP within 3000 ms$/,
    );
    return true;
  });
  await new Promise((r) => setImmediate(r));
  t.mock.timers.tick(LOOKUP_WAIT_MS);
  await silent;
  // Its look-up failed.
  (routes.get('prod') as Route).learnIp = async (ip) => `route prod could not look up ${ip} as a Pod IP: headers timeout`;
  await assert.rejects(open(router, '10.244.1.9'), /no cluster knows it .*; route prod could not look up 10\.244\.1\.9 as a Pod IP: headers timeout$/);
  // It answered: no such pod. The refusal is the plain one.
  (routes.get('prod') as Route).learnIp = async () => undefined;
  await assert.rejects(open(router, '10.244.1.9'), /no cluster knows it as a Service ClusterIP or Pod IP \(direct pass-through is off\)$/);
});
