// The PAC file is run, not read: node:vm evaluates it with nothing in its global scope (no
// dnsResolve, isInNet, myIpAddress or other PAC helpers), over the same decision tables as the
// matcher, plus seeded random names and addresses on which both must agree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';
import { RouteMatcher, type Claim } from '../../src/routing/table.js';
import { generatePac, proxyDirective } from '../../src/routing/pac.js';
import {
  MULTI_DECISIONS,
  MULTI_INGRESS_DECISIONS,
  MULTI_INGRESS_HOSTS,
  MULTI_YAML,
  PROD_NAMESPACES,
  EXCLUDE_INCLUDE_DECISIONS,
  EXCLUDE_INCLUDE_YAML,
  fixedView,
  tableFromYaml,
  withIngressHosts,
  type Decision,
} from '../helpers/routing-decisions.js';

const LISTENERS = { socks: { host: '127.0.0.1', port: 1080 }, http: { host: '::1', port: 3128 } };
const PROXY = 'SOCKS5 127.0.0.1:1080; PROXY [::1]:3128';

function compilePac(text: string): (url: string, host: string) => string {
  for (const helper of ['dnsResolve', 'isInNet', 'isResolvable', 'myIpAddress', 'dnsDomainIs', 'shExpMatch']) {
    assert.equal(text.includes(helper), false, `the PAC file uses ${helper}`);
  }
  const context = vm.createContext({});
  new vm.Script(text, { filename: 'proxy.pac' }).runInContext(context);
  const find = context.FindProxyForURL as (url: string, host: string) => string;
  return (url, host) => find(url, host);
}

/** What the PAC must answer for a host, from the matcher. */
function expected(matcher: RouteMatcher, host: string): string {
  const d = matcher.matchHost(host);
  return d.claimed && d.route.kind !== 'direct' ? PROXY : 'DIRECT';
}

function multiMatcher(direct: boolean): RouteMatcher {
  return new RouteMatcher(
    tableFromYaml(MULTI_YAML, direct),
    new Map([
      ['prod', fixedView([], PROD_NAMESPACES)],
      ['staging', fixedView([], ['shop'])],
    ]),
  );
}

function checkTable(matcher: RouteMatcher, decisions: Decision[], namespaces: string[]): void {
  const pac = compilePac(generatePac(matcher, LISTENERS, { namespaces }));
  for (const { host, route } of decisions) {
    assert.equal(pac(`https://${host}/`, host), expected(matcher, host), host);
    // What the proxy refuses goes DIRECT, as names no route claims do: a browser sent to the proxy would get an error page.
    const kind = route === undefined ? undefined : matcher.table.routes.find((r) => r.name === route)!.kind;
    assert.equal(pac(`https://${host}/`, host), kind === undefined || kind === 'direct' ? 'DIRECT' : PROXY, `${host} (${route})`);
  }
}

test('the PAC file decides the exclude/include table as the matcher does', () => {
  const matcher = new RouteMatcher(tableFromYaml(EXCLUDE_INCLUDE_YAML, true), new Map([['bettersmarter', fixedView([], ['default'])]]));
  checkTable(matcher, EXCLUDE_INCLUDE_DECISIONS, ['default']);
});

test('the PAC file decides the multi-cluster table as the matcher does, direct on or off', () => {
  checkTable(multiMatcher(true), MULTI_DECISIONS, PROD_NAMESPACES);
  checkTable(multiMatcher(false), MULTI_DECISIONS, PROD_NAMESPACES);
});

test('an ingress host two clusters learnt: refused by the matcher, DIRECT in the PAC file, direct on or off', () => {
  for (const direct of [true, false]) {
    const matcher = withIngressHosts(multiMatcher(direct));
    assert.equal(matcher.matchHost('shop.example.io').claimed, false);
    checkTable(matcher, MULTI_INGRESS_DECISIONS, PROD_NAMESPACES);
  }
});

/** A small seeded PRNG (mulberry32), so a failure names a case that replays. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `suffixes`: names to build half the random names on (0–2 random labels in front), so that rare rules are met. */
function agreeOnRandomHosts(matcher: RouteMatcher, namespaces: string[], seed: number, suffixes: string[] = []): { ties: number } {
  const pac = compilePac(generatePac(matcher, LISTENERS, { namespaces }));
  const labels = [
    'prod',
    'staging',
    'example',
    'com',
    'net',
    'org',
    'io',
    'apps',
    'svc',
    'cluster',
    'local',
    'pod',
    'shop',
    'web',
    'db-0',
    'ads',
    'intranet',
    'wiki',
    'pages',
    'preview',
    'aprod',
    'localhost',
    'monitoring',
    'default',
    '10-244-1-7',
    'x_y',
    'WEB',
    'a',
  ];
  const random = prng(seed);
  const pick = <T>(list: T[]) => list[Math.floor(random() * list.length)]!;
  const hosts: string[] = [];
  for (let i = 0; i < 4000; i++) {
    const onSuffix = suffixes.length > 0 && random() < 0.5;
    const n = onSuffix ? Math.floor(random() * 3) : 1 + Math.floor(random() * 6);
    hosts.push([...Array.from({ length: n }, () => pick(labels)), ...(onSuffix ? [pick(suffixes)] : [])].join('.') + (random() < 0.1 ? '.' : ''));
  }
  const octet = () => pick([0, 1, 5, 7, 10, 96, 111, 112, 168, 192, 203, 113, 255, 256, 999, Math.floor(random() * 256)]);
  for (let i = 0; i < 2000; i++) {
    const v4 = [octet(), octet(), octet(), octet()].join('.');
    hosts.push(v4, `::ffff:${v4}`);
    hosts.push(`fd00:10:${pick(['96', '97', '0'])}::${pick(['', '1:', 'ffff:', 'a:b:'])}${Math.floor(random() * 65536).toString(16)}`);
    const v6 = `fd00:10:${pick(['96', '97', '0'])}:${pick(['0', '0:0', '1'])}::${Math.floor(random() * 65536).toString(16)}`;
    hosts.push(pick([v6.toUpperCase(), `[${v6}]`, `::ffff:${Math.floor(random() * 65536).toString(16)}:${pick(['7', 'a00', '1'])}`, `${v6}::1`, `${v6}%eth0`]));
  }
  const counts = { proxy: 0, direct: 0, ties: 0 };
  for (const host of hosts) {
    const want = expected(matcher, host);
    counts[want === 'DIRECT' ? 'direct' : 'proxy']++;
    const d = matcher.matchHost(host);
    if (!d.claimed && d.message.includes(' is served by both ')) counts.ties++;
    assert.equal(pac(`http://${host}/`, host), want, host);
  }
  assert.ok(counts.proxy > 100 && counts.direct > 100, `the random hosts should exercise both answers (${JSON.stringify(counts)})`);
  return counts;
}

test("PAC and matcher agree on random names and addresses built from the table's own labels", () => {
  const matcher = multiMatcher(true);
  matcher.setIngressHosts('staging', ['shop.example.io', '*.preview.example.io', 'web', '*.shop', 'db-0.default']);
  agreeOnRandomHosts(matcher, PROD_NAMESPACES, 20261126);
  agreeOnRandomHosts(multiMatcher(false), PROD_NAMESPACES, 7);
  // Both clusters learning hosts, several the same: names they tie on are refused, and DIRECT in
  // the PAC file, direct on or off.
  const learnt = [
    ...new Set(
      Object.values(MULTI_INGRESS_HOSTS)
        .flat()
        .map((h) => h.replace(/^\*\./, '')),
    ),
  ];
  const ties = agreeOnRandomHosts(withIngressHosts(multiMatcher(true)), PROD_NAMESPACES, 31, learnt);
  assert.ok(ties.ties > 100, `the random hosts should meet hosts both clusters learnt (${ties.ties})`);
  agreeOnRandomHosts(withIngressHosts(multiMatcher(false)), PROD_NAMESPACES, 32, learnt);
  // Catch-alls: "." and /0 on a reject route (so that they show in the PAC), a short exclude.
  const catchAll = new RouteMatcher(
    tableFromYaml(`
routes:
  - { name: prod, kind: cluster, include: [example.com], exclude: [org, "*.apps.example.com"], cidrs: ["fd00:10:96::/48", 10.96.0.0/16] }
  - { name: rest, kind: reject, include: ["."], exclude: [io], cidrs: [0.0.0.0/0, "::/0"] }
  - { name: lan, kind: direct, include: [local, shop.example.com], cidrs: [10.96.7.0/24] }
`),
    new Map([['prod', fixedView([], ['shop', 'local'])]]),
  );
  agreeOnRandomHosts(catchAll, ['shop', 'local'], 99);
});

test('what only the proxy knows: IPs in the watch caches and unconfirmed "svc.ns" names go DIRECT in the PAC', () => {
  const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, true), new Map([['prod', fixedView(['10.244.0.5'], undefined)]]));
  const pac = compilePac(generatePac(matcher, LISTENERS));
  assert.equal((matcher.matchHost('10.244.0.5') as Claim).reason, 'known-ip');
  assert.equal(pac('http://10.244.0.5/', '10.244.0.5'), 'DIRECT');
  assert.equal((matcher.matchHost('web.shop') as Claim).reason, 'short-name');
  assert.equal(pac('http://web.shop/', 'web.shop'), 'DIRECT');
  // Without a namespace list only single labels count as short names.
  assert.equal(pac('http://web/', 'web'), PROXY);
  assert.equal(pac('http://web.shop.svc/', 'web.shop.svc'), PROXY);
});

test('the PAC names only the listeners that exist, reachable addresses for wildcard binds', () => {
  assert.equal(proxyDirective({ socks: { host: '127.0.0.1', port: 1080 } }), 'SOCKS5 127.0.0.1:1080');
  assert.equal(proxyDirective({ http: { host: '0.0.0.0', port: 3128 } }), 'PROXY 127.0.0.1:3128');
  assert.equal(proxyDirective({ socks: { host: '::', port: 1 }, http: { host: '::1', port: 2 } }), 'SOCKS5 [::1]:1; PROXY [::1]:2');
  assert.throws(() => proxyDirective({}), /needs a SOCKS5 or HTTP listener/);
  const onlyHttp = compilePac(generatePac(multiMatcher(false), { http: { host: '127.0.0.1', port: 3128 } }));
  assert.equal(onlyHttp('http://web.shop.svc.prod/', 'web.shop.svc.prod'), 'PROXY 127.0.0.1:3128');
  assert.equal(onlyHttp('https://www.example.com/', 'www.example.com'), 'DIRECT');
});

test('a browser on another machine gets the address it reached for wildcard binds, and no loopback-only listener', () => {
  const wildcards = { socks: { host: '0.0.0.0', port: 1080 }, http: { host: '::', port: 3128 } };
  assert.equal(proxyDirective({ ...wildcards, reachedAt: '192.0.2.1' }), 'SOCKS5 192.0.2.1:1080; PROXY 192.0.2.1:3128');
  // The dual-stack listener reports an IPv4 client's local address IPv4-mapped.
  assert.equal(proxyDirective({ ...wildcards, reachedAt: '::ffff:192.0.2.1' }), 'SOCKS5 192.0.2.1:1080; PROXY 192.0.2.1:3128');
  // An IPv4 wildcard cannot be reached at an IPv6 address.
  assert.equal(proxyDirective({ ...wildcards, reachedAt: '2001:db8::1' }), 'PROXY [2001:db8::1]:3128');
  // Loopback-only SOCKS would send that browser to its own machine's port 1080.
  assert.equal(
    proxyDirective({ socks: { host: '127.0.0.1', port: 1080 }, http: { host: '0.0.0.0', port: 3128 }, reachedAt: '192.0.2.1' }),
    'PROXY 192.0.2.1:3128',
  );
  assert.equal(proxyDirective({ socks: { host: '192.0.2.9', port: 1080 }, reachedAt: '192.0.2.1' }), 'SOCKS5 192.0.2.9:1080');
  // A browser on this machine is answered as before, whichever loopback address it reached.
  for (const reachedAt of ['127.0.0.2', '::1', '::ffff:127.0.0.1', undefined]) {
    assert.equal(proxyDirective({ ...wildcards, reachedAt }), 'SOCKS5 127.0.0.1:1080; PROXY [::1]:3128', String(reachedAt));
  }
  const remote = compilePac(generatePac(multiMatcher(false), { ...wildcards, reachedAt: '192.0.2.1' }));
  assert.equal(remote('http://web.shop.svc.prod/', 'web.shop.svc.prod'), 'SOCKS5 192.0.2.1:1080; PROXY 192.0.2.1:3128');
});

test('names from a hostile API server are written as ASCII escapes: U+2028 cannot end a line of the PAC file', () => {
  const hostile = ['shop', 'evil\u2028var PROXY = "PROXY attacker:1";//', 'caf\u00e9', 'x\u2029y'];
  const text = generatePac(multiMatcher(true), LISTENERS, { namespaces: hostile });
  assert.equal(/[^\x00-\x7e]/.test(text), false, 'only ASCII in the file');
  const context = vm.createContext({});
  new vm.Script(text, { filename: 'proxy.pac' }).runInContext(context);
  assert.deepEqual(Object.keys(context.NAMESPACES as object).sort(), [...hostile].sort(), 'the names themselves, unchanged');
  assert.equal(context.PROXY, PROXY);
});

test('internationalized names in the config file are their ASCII form, as browsers hand hosts to the PAC file', () => {
  const matcher = new RouteMatcher(
    tableFromYaml(`
routes:
  - { name: prod, kind: cluster, include: [bücher.example, "*.例え.jp"], exclude: [Straße.bücher.example] }
`),
  );
  const pac = compilePac(generatePac(matcher, LISTENERS));
  assert.deepEqual(matcher.table.routes[0]!.include, ['xn--bcher-kva.example', '*.xn--r8jz45g.jp']);
  assert.deepEqual(matcher.table.routes[0]!.exclude, ['xn--strae-oqa.xn--bcher-kva.example']);
  for (const host of ['xn--bcher-kva.example', 'www.XN--BCHER-KVA.example.', 'a.xn--r8jz45g.jp']) {
    assert.equal(expected(matcher, host), PROXY, host);
    assert.equal(pac(`https://${host}/`, host), PROXY, host);
  }
  for (const host of ['xn--strae-oqa.xn--bcher-kva.example']) {
    assert.equal(pac(`https://${host}/`, host), expected(matcher, host), host);
    assert.equal(pac(`https://${host}/`, host), 'DIRECT', host);
  }
  assert.throws(() => tableFromYaml('routes: [{name: a, kind: cluster, include: ["bü cher.example"]}]\n'), /not a valid internationalized domain name/);
});
