// The konnectivity route kind in the config file: konnectivity: {server, mode, ca, cert, key} and
// a context for names; every mistake named with its line and key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { RouteMatcher } from '../../src/routing/table.js';
import { describeRoute } from '../../src/routing/table-spec.js';

const parse = (text: string) => parseConfig(text, 'config.yaml', 'cluster.local');

function refuses(text: string, line: number, key: string, message: RegExp): void {
  assert.throws(
    () => parse(text),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.line, line, err.message);
      assert.equal(err.key, key, err.message);
      assert.match(err.message, message);
      return true;
    },
  );
}

const GUEST = `routes:
  - name: guest
    kind: konnectivity
    context: guest-admin
    default: true
    cidrs: [10.96.0.0/12]
    konnectivity:
      server: https://konnectivity.example.com:8090
      mode: http-connect
      ca: /etc/konnectivity/ca.crt
      cert: /etc/konnectivity/client.crt
      key: /etc/konnectivity/client.key
`;

test('a konnectivity route parses with its server, mode, files and context', () => {
  const cfg = parse(GUEST);
  assert.equal(cfg.defaultRoute, 'guest');
  const r = cfg.routes[0]!;
  assert.equal(r.kind, 'konnectivity');
  if (r.kind !== 'konnectivity') return;
  assert.equal(r.context, 'guest-admin');
  assert.deepEqual(r.cidrs, ['10.96.0.0/12']);
  assert.deepEqual(r.konnectivity, {
    server: 'https://konnectivity.example.com:8090',
    mode: 'http-connect',
    ca: '/etc/konnectivity/ca.crt',
    cert: '/etc/konnectivity/client.crt',
    key: '/etc/konnectivity/client.key',
  });
});

test('relative ca, cert and key are relative to the config file, as extra-ca is, not to the working directory', () => {
  const text =
    'routes:\n  - name: guest\n    kind: konnectivity\n    konnectivity: {server: "https://k.example.com:8090", ca: pki/ca.crt, cert: ../tls.crt, key: /abs/tls.key}\n';
  const r = parseConfig(text, '/etc/proxyout/config.yaml', 'cluster.local').routes[0]!;
  assert.ok(r.kind === 'konnectivity');
  assert.deepEqual([r.konnectivity.ca, r.konnectivity.cert, r.konnectivity.key], ['/etc/proxyout/pki/ca.crt', '/etc/tls.crt', '/abs/tls.key']);
});

test("mode defaults to grpc (the server's default); a unix socket takes no TLS files", () => {
  const r = parse('routes:\n  - name: hosted\n    kind: konnectivity\n    konnectivity: {server: "unix:///run/konnectivity/konnectivity-server.socket"}\n')
    .routes[0]!;
  assert.ok(r.kind === 'konnectivity');
  assert.deepEqual(r.konnectivity, { server: 'unix:///run/konnectivity/konnectivity-server.socket', mode: 'grpc' });
  assert.equal(r.context, 'hosted', 'the context defaults to the route name');
});

test('konnectivity mistakes are refused with line and key', () => {
  refuses('routes:\n  - name: g\n    kind: konnectivity\n', 2, 'routes[0]', /needs konnectivity: \{server, mode, ca, cert, key\}/);
  refuses('routes:\n  - name: g\n    kind: konnectivity\n    konnectivity: https://k:8090\n', 4, 'routes[0].konnectivity', /must be a mapping/);
  refuses('routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      mode: grpc\n', 4, 'routes[0].konnectivity', /needs a server/);
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: http://k:8090\n',
    5,
    'routes[0].konnectivity.server',
    /https:\/\/host:port \(TLS\) or unix:\/\/\/path, not http:/,
  );
  refuses('routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: https://k\n', 5, 'routes[0].konnectivity.server', /needs a port/);
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: unix://relative.sock\n',
    5,
    'routes[0].konnectivity.server',
    /unix:\/\/\/absolute\/path/,
  );
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: https://k:8090\n      mode: socks\n',
    6,
    'routes[0].konnectivity.mode',
    /unknown mode "socks" \(supported: grpc, http-connect\)/,
  );
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: https://k:8090\n      cert: /c\n',
    4,
    'routes[0].konnectivity',
    /cert and key go together/,
  );
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: unix:///s\n      ca: /ca\n',
    4,
    'routes[0].konnectivity',
    /unix socket server takes no ca, cert or key/,
  );
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    konnectivity:\n      server: https://k:8090\n      insecure: true\n',
    6,
    'routes[0].konnectivity.insecure',
    /unknown key in konnectivity \(allowed: server, mode, ca, cert, key\)/,
  );
  refuses(
    'routes:\n  - name: g\n    kind: konnectivity\n    ingress: {domains: [a.com]}\n    konnectivity: {server: "unix:///s"}\n',
    4,
    'routes[0].ingress',
    /unknown key in a konnectivity route \(allowed: name, kind, include, exclude, cidrs, context, default, konnectivity\)/,
  );
});

test('a cluster route and a konnectivity route cannot share a context', () => {
  refuses(
    'routes:\n  - name: a\n    kind: cluster\n    context: guest\n  - name: b\n    kind: konnectivity\n    context: guest\n    konnectivity: {server: "unix:///s"}\n',
    7,
    'routes[1].context',
    /context "guest" is already used by route a/,
  );
});

test('--context naming the context of a konnectivity route is refused, naming the route: it would be served twice', () => {
  assert.throws(
    () => tableFrom(parse(GUEST), { contexts: ['guest-admin'], clusterDomain: 'cluster.local' }),
    /--context guest-admin: route "guest" \(config\.yaml:2\) is a konnectivity route for this context/,
  );
  // Another context beside it stays a route of its own.
  const table = tableFrom(parse(GUEST), { contexts: ['prod'], clusterDomain: 'cluster.local' });
  assert.deepEqual(
    table.routes.map((r) => [r.name, r.kind]),
    [
      ['prod', 'cluster'],
      ['guest', 'konnectivity'],
    ],
  );
});

test("the table matches a konnectivity route's own names and describes it", () => {
  const table = tableFrom(parse(GUEST), { contexts: [], clusterDomain: 'cluster.local' });
  assert.equal(table.defaultRoute, 'guest');
  const matcher = new RouteMatcher(table);
  const claim = matcher.match({ host: 'web.shop.guest', port: 80, type: 'domain' });
  assert.ok(claim.claimed && claim.route.name === 'guest' && claim.name?.kind === 'service', JSON.stringify(claim));
  const short = matcher.match({ host: 'web.shop.svc.cluster.local', port: 80, type: 'domain' });
  assert.ok(short.claimed && short.route.name === 'guest');
  assert.match(
    describeRoute(table, table.routes[0]!),
    /^guest \(konnectivity guest-admin via https:\/\/konnectivity\.example\.com:8090 \(http-connect\), default\): <svc>\.<ns>\.guest/,
  );
});
