import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StartupError } from '../../src/core/errors.js';
import { ConfigError, parseConfig } from '../../src/config/validate.js';
import { defaultConfigPath, loadRoutingTable, tableFrom, type TableFlags } from '../../src/config/load.js';
import { MULTI_YAML } from '../helpers/routing-decisions.js';
import { scratchDir } from '../helpers/scratch-dir.js';

const parse = (text: string) => parseConfig(text, 'config.yaml', 'cluster.local');
const flags = (f: Partial<TableFlags> = {}): TableFlags => ({ contexts: [], clusterDomain: 'cluster.local', ...f });

/** Asserts the text is refused with "config.yaml:LINE: KEY: …matching". */
function refuses(text: string, line: number, key: string, message: RegExp): void {
  assert.throws(
    () => parse(text),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.ok(err instanceof StartupError);
      assert.equal(err.line, line, err.message);
      assert.equal(err.key, key, err.message);
      assert.ok(err.message.startsWith(`config.yaml:${line}: ${key ? `${key}: ` : ''}`), err.message);
      assert.match(err.message, message);
      return true;
    },
  );
}

test('the issue example parses into routes with their origins', () => {
  const cfg = parse(MULTI_YAML);
  assert.equal(cfg.direct, true);
  assert.equal(cfg.defaultRoute, 'prod');
  assert.deepEqual(
    cfg.routes.map((r) => [r.name, r.kind, r.origin]),
    [
      ['prod', 'cluster', 'config.yaml:4'],
      ['staging', 'cluster', 'config.yaml:12'],
      ['intranet', 'direct', 'config.yaml:16'],
      ['blocked', 'reject', 'config.yaml:20'],
    ],
  );
  const prod = cfg.routes[0]!;
  assert.equal(prod.kind, 'cluster');
  if (prod.kind !== 'cluster') return;
  assert.equal(prod.context, 'prod-admin');
  assert.deepEqual(prod.cidrs, ['10.96.0.0/12', 'fd00:10:96::/112']);
  assert.deepEqual(prod.ingress, { domains: ['*.apps.prod.example.com', 'shop.example.org'], controller: 'openshift-ingress/router-default' });
  const staging = cfg.routes[1]!;
  assert.equal(staging.kind === 'cluster' && staging.context, 'staging'); // context defaults to the name
});

test('suffixes and CIDRs are normalized; an empty file is an empty table', () => {
  const cfg = parse(
    'routes:\n  - name: Prod\n    kind: cluster\n    include: [Prod.Example.COM.]\n    cidrs: ["FD00::0/64", "::ffff:10.0.0.0/104", 10.1.2.3]\n',
  );
  assert.deepEqual(
    [cfg.routes[0]!.name, cfg.routes[0]!.include, cfg.routes[0]!.cidrs],
    ['prod', ['prod.example.com'], ['fd00::/64', '10.0.0.0/8', '10.1.2.3/32']],
  );
  assert.deepEqual(parse('').routes, []);
  assert.deepEqual(parse('# nothing yet\n').routes, []);
});

test('unknown keys are refused with their line and key', () => {
  refuses('direct: false\nroute: []\n', 2, 'route', /unknown key in the top level; did you mean "routes"\? \(allowed: direct, routes, extra-ca, forward\)/);
  refuses(
    'routes:\n  - name: a\n    kind: cluster\n    contxt: a\n',
    4,
    'routes[0].contxt',
    /unknown key in a cluster route; did you mean "context"\? \(allowed: name, kind, include, exclude, cidrs, context, default, ingress, via\)/,
  );
  refuses('routes:\n  - name: a\n    kind: direct\n\n    context: x\n', 5, 'routes[0].context', /unknown key in a direct route/);
  refuses('routes:\n  - name: a\n    kind: reject\n    default: true\n', 4, 'routes[0].default', /unknown key in a reject route/);
  refuses(
    'routes:\n- name: a\n  kind: cluster\n  ingress:\n    domains: []\n    class: nginx\n',
    6,
    'routes[0].ingress.class',
    /unknown key in ingress; did you mean "classes"\? \(allowed: domains, controller, classes\)/,
  );
  refuses('routes: [{name: a, kind: cluster, ingress: {domain: [x.com]}}]\n', 1, 'routes[0].ingress.domain', /unknown key/);
});

test('a mistyped key is refused with the key it likely meant', () => {
  refuses(
    'routes:\n  - name: a\n    kind: direct\n    incldue: [a.com]\n',
    4,
    'routes[0].incldue',
    /unknown key in a direct route; did you mean "include"\? \(allowed: /,
  );
  refuses('routes:\n  - name: a\n    kind: cluster\n    cidr: [10.0.0.0/8]\n', 4, 'routes[0].cidr', /did you mean "cidrs"\?/);
  refuses('rotues: []\n', 1, 'rotues', /the top level; did you mean "routes"\?/);
  refuses('extraCa: ca.pem\n', 1, 'extraCa', /did you mean "extra-ca"\?/);
  refuses('routes: [{name: a, kind: cluster, ingress: {domain: [x.com]}}]\n', 1, 'routes[0].ingress.domain', /did you mean "domains"\?/);
  // Nothing close: only the list.
  refuses('routes:\n  - name: a\n    kind: reject\n    ssh: {host: x}\n', 4, 'routes[0].ssh', /unknown key in a reject route \(allowed: /);
});

test('an unknown kind names the supported kinds', () => {
  refuses('routes:\n  - name: jump\n    kind: vpn\n', 3, 'routes[0].kind', /unknown kind "vpn" \(supported: cluster, direct, reject, ssh, konnectivity\)/);
  refuses('routes:\n  - name: jump\n', 2, 'routes[0]', /a route needs a kind \(cluster, direct, reject, ssh, konnectivity\)/);
  refuses('routes:\n  - kind: direct\n', 2, 'routes[0]', /a route needs a name/);
});

test('wrong types are refused', () => {
  refuses('direct: yes\n', 1, 'direct', /must be true or false, not string "yes"/);
  refuses('routes: {name: a}\n', 1, 'routes', /must be a list of routes, not a mapping/);
  refuses('routes:\n  - just-a-name\n', 2, 'routes[0]', /a route must be a mapping/);
  refuses('routes:\n  - name: a\n    kind: cluster\n    include: a.example.com\n', 4, 'routes[0].include', /must be a list, e.g. \[a\.example\.com\]/);
  refuses(
    'routes:\n  - name: a\n    kind: cluster\n    include:\n      - x.com\n      - 42\n',
    6,
    'routes[0].include[1]',
    /must be a non-empty string, not number 42/,
  );
  refuses('routes:\n  - name: a\n    kind: cluster\n    default: "true"\n', 4, 'routes[0].default', /must be true or false/);
  refuses('routes:\n  - name: [a]\n    kind: cluster\n', 2, 'routes[0].name', /must be a non-empty string, not a list/);
  refuses('[1, 2]\n', 1, '', /must be a mapping/);
});

test('duplicate names, contexts and defaults are refused at the second one', () => {
  refuses(
    'routes:\n  - {name: a, kind: cluster}\n  - {name: b, kind: direct}\n  - {name: A, kind: reject}\n',
    4,
    'routes[2].name',
    /route name "a" is already used on line 2/,
  );
  refuses(
    'routes:\n  - {name: a, kind: cluster, context: ctx}\n  - {name: b, kind: cluster, context: ctx}\n',
    3,
    'routes[1].context',
    /context "ctx" is already used by route a/,
  );
  refuses(
    'routes:\n  - {name: a, kind: cluster, default: true}\n  - {name: b, kind: cluster, default: true}\n',
    3,
    'routes[1].default',
    /route a is already the default/,
  );
  refuses('routes:\n  - name: a\n    name: b\n', 3, '', /not valid YAML: duplicated mapping key/);
});

test('ingress.classes: a controller Service per ingress class', () => {
  const cfg = parse('routes:\n  - name: a\n    kind: cluster\n    ingress: {classes: {internal: ingress-internal/ingress-nginx-controller}}\n');
  const a = cfg.routes[0]!;
  assert.deepEqual(a.kind === 'cluster' && a.ingress, { domains: [], classes: { internal: 'ingress-internal/ingress-nginx-controller' } });
});

test('bad suffixes, wildcards, route names and controllers are refused', () => {
  const route = (line: string) => `routes:\n  - name: a\n    kind: cluster\n    ${line}\n`;
  refuses(route('include: [".example.com"]'), 4, 'routes[0].include[0]', /write "example\.com" without the leading dot/);
  refuses(route('include: ["exa mple.com"]'), 4, 'routes[0].include[0]', /not a valid DNS name/);
  refuses(route('include: ["a..b"]'), 4, 'routes[0].include[0]', /not a valid DNS name/);
  refuses(route('include: ["foo.*.com"]'), 4, 'routes[0].include[0]', /a "\*" may only stand alone as the first label/);
  refuses(route('include: ["10.0.0.1"]'), 4, 'routes[0].include[0]', /put it in cidrs/);
  // A name the resolver reads as an address would never match as a name: refused, not ignored.
  refuses(route('include: ["2130706433"]'), 4, 'routes[0].include[0]', /is the IP address 127\.0\.0\.1 .*put it in cidrs/);
  refuses(route('exclude: ["10.1.2"]'), 4, 'routes[0].exclude[0]', /is the IP address 10\.1\.0\.2 /);
  // A port or a URL is not an IP block: say what to write instead.
  refuses(route('include: ["example.com:443"]'), 4, 'routes[0].include[0]', /matched on every port and scheme: write "example\.com"$/);
  refuses(route('include: ["https://console.example.com/"]'), 4, 'routes[0].include[0]', /write "console\.example\.com"$/);
  refuses(route('include: ["10.0.0.1:80"]'), 4, 'routes[0].include[0]', /is an IP address or block: put it in cidrs/);
  refuses(route('exclude: ["."]'), 4, 'routes[0].exclude[0]', /only allowed in include/);
  refuses(route(`include: ["${'a'.repeat(64)}.com"]`), 4, 'routes[0].include[0]', /not a valid DNS name/);
  refuses(route('ingress: {domains: ["*.apps.example.com", "*"]}'), 4, 'routes[0].ingress.domains[1]', /may only stand alone as the first label/);
  refuses(route('ingress: {controller: router-default}'), 4, 'routes[0].ingress.controller', /not namespace\/service/);
  refuses(route('ingress: {classes: [internal]}'), 4, 'routes[0].ingress.classes', /must be a mapping of ingress class names to namespace\/service/);
  refuses(route('ingress:\n      classes:\n        internal: nginx'), 6, 'routes[0].ingress.classes.internal', /"nginx" is not namespace\/service/);
  refuses('routes:\n  - {name: "prod_eu", kind: cluster}\n', 2, 'routes[0].name', /not a valid route name/);
  refuses('routes:\n  - {name: svc, kind: cluster}\n', 2, 'routes[0].name', /cannot name a cluster route/);
  refuses('routes:\n  - {name: cluster.local, kind: cluster}\n', 2, 'routes[0].name', /cannot name a cluster route/);
});

test('bad CIDRs are refused with the line of the item', () => {
  const route = (items: string) => `routes:\n  - name: a\n    kind: cluster\n    cidrs:\n${items}`;
  refuses(route('      - 10.96.0.0/12\n      - 10.96.0.1/12\n'), 6, 'routes[0].cidrs[1]', /host bits set; did you mean 10\.96\.0\.0\/12\?/);
  refuses(route('      - 10.96.0.0/33\n'), 5, 'routes[0].cidrs[0]', /prefix length must be a number from 0 to 32/);
  refuses(route('      - 300.1.1.0/24\n'), 5, 'routes[0].cidrs[0]', /not a CIDR block/);
  refuses(route('      - fd00::/129\n'), 5, 'routes[0].cidrs[0]', /0 to 128/);
  refuses(route('      - example.com\n'), 5, 'routes[0].cidrs[0]', /not a CIDR block/);
});

test('YAML syntax errors carry their line', () => {
  refuses('routes:\n  - name: a\n    kind: [cluster\n', 4, '', /not valid YAML/);
});

test('two routes of a file claiming one suffix or block: the error names both origins', () => {
  const text = 'routes:\n  - {name: a, kind: cluster, include: [x.com]}\n  - {name: b, kind: direct, include: [x.com]}\n';
  assert.throws(() => tableFrom(parse(text), flags()), /invalid routing table: routes a \(config\.yaml:2\) and b \(config\.yaml:3\) both claim "x\.com"/);
  const cidr = 'routes:\n  - {name: a, kind: cluster, cidrs: [10.0.0.0/8]}\n  - {name: b, kind: direct, cidrs: [10.0.0.0/8]}\n';
  assert.throws(() => tableFrom(parse(cidr), flags()), /routes a \(config\.yaml:2\) and b \(config\.yaml:3\) both claim 10\.0\.0\.0\/8/);
});

test('flags alone: one cluster route per --context, the first is the default; --direct adds pass-through', () => {
  const t = tableFrom(undefined, flags({ contexts: ['prod', 'staging'], direct: true }));
  assert.deepEqual(
    t.routes.map((r) => [r.name, r.kind, r.origin]),
    [
      ['prod', 'cluster', '--context prod'],
      ['staging', 'cluster', '--context staging'],
      ['direct', 'direct', '--direct'],
    ],
  );
  assert.equal(t.defaultRoute, 'prod');
  assert.equal(t.directRoute, 'direct');
  const none = tableFrom(undefined, flags({ currentContext: 'kind-kind' }));
  assert.deepEqual([none.routes.map((r) => r.name), none.defaultRoute, none.directRoute], [['kind-kind'], 'kind-kind', undefined]);
  assert.throws(() => tableFrom(undefined, flags()), /no cluster to serve/);
  assert.throws(() => tableFrom(undefined, flags({ contexts: ['a', 'a'] })), /--context a is given twice/);
});

test('a table of routes without a cluster needs no kubeconfig; the current context serves only when no route was configured', () => {
  let asked = 0;
  const lazy = (ctx?: string) => ({
    ...flags(),
    get currentContext() {
      asked++;
      return ctx;
    },
  });
  const t = tableFrom(parse('direct: true\nroutes:\n  - {name: blocked, kind: reject, include: [ads.example.com]}\n'), lazy('kind-kind'));
  assert.deepEqual(
    t.routes.map((r) => [r.name, r.kind]),
    [
      ['blocked', 'reject'],
      ['direct', 'direct'],
    ],
  );
  assert.equal(t.defaultRoute, undefined);
  assert.equal(asked, 0, 'the kubeconfig was not read');
  // No routes at all: the kubeconfig's current context is the one route (as before config files).
  assert.deepEqual(
    tableFrom(parse('routes: []\n'), lazy('kind-kind')).routes.map((r) => r.name),
    ['kind-kind'],
  );
  assert.throws(() => tableFrom(parse('routes: []\n'), lazy(undefined)), /no cluster to serve/);
});

test('contexts that are no DNS name, or a cluster DNS suffix, get a readable route name; clashes are refused', () => {
  const t = tableFrom(
    undefined,
    flags({ contexts: ['arn:aws:eks:eu-west-1:123456789012:cluster/Prod', 'default/api-x-example-com:6443/kube:admin', 'admin@kind'] }),
  );
  assert.deepEqual(
    t.routes.map((r) => r.name),
    ['arn-aws-eks-eu-west-1-123456789012-cluster-prod', 'default-api-x-example-com-6443-kube-admin', 'admin-kind'],
  );
  assert.equal((t.routes[0] as { context: string }).context, 'arn:aws:eks:eu-west-1:123456789012:cluster/Prod');
  assert.throws(() => tableFrom(undefined, flags({ contexts: ['a_b', 'a:b'] })), /--context a_b and --context a:b are both named "a-b"/);
  // Named as a cluster DNS suffix, which kubectl does not mind: a stand-in too, not a refused start.
  assert.deepEqual(
    tableFrom(undefined, flags({ contexts: ['svc', 'localhost', 'dev.cluster.local', 'k8s.pod'] })).routes.map((r) => [
      r.name,
      (r as { context: string }).context,
    ]),
    [
      ['svc-context', 'svc'],
      ['localhost-context', 'localhost'],
      ['dev-cluster-local', 'dev.cluster.local'],
      ['k8s-pod', 'k8s.pod'],
    ],
  );
  assert.equal(tableFrom(undefined, flags({ contexts: [], currentContext: 'localhost' })).routes[0]!.name, 'localhost-context');
  assert.throws(() => tableFrom(undefined, flags({ contexts: ['@@'] })), /it has no letters or digits/);
});

test('file and flags: --context picks the file route for that context and makes it the default', () => {
  const cfg = parse(MULTI_YAML);
  const t = tableFrom(cfg, flags({ contexts: ['staging'] }));
  assert.deepEqual(
    t.routes.map((r) => r.name),
    ['staging', 'prod', 'intranet', 'blocked', 'direct'],
  );
  assert.equal(t.defaultRoute, 'staging');
  assert.equal(t.routes[0], cfg.routes[1]); // the file's route, with its includes
  // By context too, and a new context becomes a new route.
  const byContext = tableFrom(cfg, flags({ contexts: ['prod-admin', 'dev'] }));
  assert.deepEqual([byContext.routes.map((r) => r.name), byContext.defaultRoute], [['prod', 'dev', 'staging', 'intranet', 'blocked', 'direct'], 'prod']);
  assert.throws(() => tableFrom(cfg, flags({ contexts: ['intranet'] })), /route "intranet" \(config\.yaml:16\) is a direct route, not a cluster/);
  assert.throws(() => tableFrom(cfg, flags({ contexts: ['prod'] })), /route "prod" \(config\.yaml:4\) is for context prod-admin/);
  // Without --context the file's default: true decides, else the first cluster route.
  assert.equal(tableFrom(cfg, flags()).defaultRoute, 'prod');
  assert.equal(
    tableFrom(parse('routes:\n  - {name: x, kind: direct}\n  - {name: b, kind: cluster}\n  - {name: c, kind: cluster}\n'), flags()).defaultRoute,
    'b',
  );
  // A file with routes but no cluster route serves those routes alone: no cluster is added.
  const onlyDirect = tableFrom(parse('direct: true\nroutes:\n  - {name: lan, kind: direct, include: [lan]}\n'), flags({ currentContext: 'kind-kind' }));
  assert.deepEqual([onlyDirect.routes.map((r) => r.name), onlyDirect.defaultRoute], [['lan', 'direct'], undefined]);
});

test('direct: --direct and --no-direct beat the file; a route named "direct" of another kind is refused', () => {
  const cfg = parse(MULTI_YAML);
  assert.equal(tableFrom(cfg, flags()).directRoute, 'direct');
  assert.equal(tableFrom(cfg, flags({ direct: false })).directRoute, undefined);
  assert.equal(
    tableFrom(cfg, flags({ direct: false })).routes.some((r) => r.name === 'direct'),
    false,
  );
  const off = parse('direct: false\nroutes: [{name: a, kind: cluster}]\n');
  assert.equal(tableFrom(off, flags({ direct: true })).directRoute, 'direct');
  assert.equal(tableFrom(off, flags({ direct: true })).routes.at(-1)!.origin, '--direct');
  assert.equal(tableFrom(cfg, flags()).routes.at(-1)!.origin, 'config.yaml:2');
  // The user's own direct route named "direct" is the pass-through route, includes and all.
  const own = tableFrom(parse('direct: true\nroutes: [{name: a, kind: cluster}, {name: direct, kind: direct, include: [lan]}]\n'), flags());
  assert.deepEqual([own.routes.map((r) => r.name), own.routes[1]!.include], [['a', 'direct'], ['lan']]);
  assert.throws(
    () => tableFrom(parse('routes: [{name: a, kind: cluster}, {name: direct, kind: reject}]\n'), flags({ direct: true })),
    /needs the route name "direct"/,
  );
});

test('loadRoutingTable: --config must exist; the default file is read only without --context', () => {
  const dir = scratchDir('proxyout-config-');
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, 'routes:\n  - {name: from-file, kind: cluster}\n');
  assert.deepEqual(
    loadRoutingTable(flags(), file).routes.map((r) => r.name),
    ['from-file'],
  );
  assert.deepEqual(
    loadRoutingTable(flags({ contexts: ['cli'] }), file).routes.map((r) => r.name),
    ['cli'],
  );
  assert.deepEqual(
    loadRoutingTable(flags({ config: file, contexts: ['cli'] }), '/nonexistent').routes.map((r) => r.name),
    ['cli', 'from-file'],
  );
  assert.deepEqual(
    loadRoutingTable(flags({ currentContext: 'cur' }), path.join(dir, 'absent.yaml')).routes.map((r) => r.name),
    ['cur'],
  );
  assert.throws(() => loadRoutingTable(flags({ config: path.join(dir, 'absent.yaml') })), /cannot read the config file .*absent\.yaml: no such file/);
  writeFileSync(file, 'routes:\n  - {name: a, kind: cluster, colour: red}\n');
  assert.throws(
    () => loadRoutingTable(flags({ config: file })),
    (e: Error) => e instanceof ConfigError && e.message.startsWith(`${file}:2: routes[0].colour: unknown key`),
  );
  assert.match(defaultConfigPath(), /kubectl-proxyout[/\\]config\.yaml$/);
  if (process.platform !== 'darwin' && process.platform !== 'win32') {
    assert.equal(defaultConfigPath({ XDG_CONFIG_HOME: '/etc/xdg-me' }), '/etc/xdg-me/kubectl-proxyout/config.yaml');
    // Relative: invalid by the XDG spec, so ignored (it would follow the working directory).
    assert.equal(defaultConfigPath({ XDG_CONFIG_HOME: 'rel' }), path.join(os.homedir(), '.config', 'kubectl-proxyout', 'config.yaml'));
    assert.equal(defaultConfigPath({}), path.join(os.homedir(), '.config', 'kubectl-proxyout', 'config.yaml'));
  }
});

test('loadRoutingTable reads the file in UTF-8 (a BOM and CRLF line ends too) and in UTF-16 with a byte-order mark', () => {
  const dir = scratchDir('proxyout-config-');
  const text = 'routes:\r\n  - name: a\r\n    kind: direct\r\n    include: [a.example.com]\r\n';
  const utf16be = (t: string) => Buffer.from(t, 'utf16le').swap16();
  const encodings: Array<[string, Buffer]> = [
    ['utf-8 bom', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)])],
    ['utf-16le', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')])],
    ['utf-16be', Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be(text)])],
  ];
  for (const [name, bytes] of encodings) {
    const file = path.join(dir, `${name}.yaml`);
    writeFileSync(file, bytes);
    const table = loadRoutingTable(flags({ config: file }));
    assert.deepEqual(
      table.routes.map((r) => [r.name, r.include, r.origin]),
      [['a', ['a.example.com'], `${file}:2`]],
      name,
    );
    writeFileSync(
      file,
      Buffer.concat([
        bytes.subarray(0, name === 'utf-8 bom' ? 3 : 2),
        name === 'utf-16be'
          ? utf16be('routes:\n  - name: a\n    kind: direct\n    colour: red\n')
          : Buffer.from('routes:\n  - name: a\n    kind: direct\n    colour: red\n', name === 'utf-8 bom' ? 'utf8' : 'utf16le'),
      ]),
    );
    assert.throws(
      () => loadRoutingTable(flags({ config: file })),
      (e: Error) => e.message.startsWith(`${file}:4: routes[0].colour: unknown key`),
      name,
    );
  }
});

test('an empty list item (a "-" alone) is refused at its own line', () => {
  const routes = 'routes:\n  - name: a\n    kind: direct\n';
  refuses(`${routes}  -\n  - name: b\n`, 4, 'routes[1]', /a route must be a mapping with name and kind, not null/);
  refuses(`${routes}  -\n\n# the end\n`, 4, 'routes[1]', /not null/);
  refuses('routes:\n  -\n  -\n    name: b\n', 2, 'routes[0]', /not null/);
  refuses(`${routes}    cidrs:\n      - 10.0.0.0/8\n      -   # none\n      # a comment\n\n      - 10.0.0.1/8\n`, 6, 'routes[0].cidrs[1]', /not null/);
});

test('anchors and aliases share lists; comments and blank lines keep the line numbers right', () => {
  const text =
    '# routes\n\nroutes:\n  - name: a          # first\n    kind: cluster\n    exclude: &old [old.example.com]\n\n  - name: b\n    kind: cluster\n    exclude: *old\n    cidrs:\n      # the pod network\n      - 10.244.0.0/16\n      - 10.96.0.0/33\n';
  refuses(text, 14, 'routes[1].cidrs[1]', /0 to 32/);
  const cfg = parse(text.replace('/33', '/12'));
  assert.deepEqual(
    cfg.routes.map((r) => [r.name, r.exclude, r.origin]),
    [
      ['a', ['old.example.com'], 'config.yaml:4'],
      ['b', ['old.example.com'], 'config.yaml:8'],
    ],
  );
});

test('merge keys (<<) take a shared part of routes, as kubectl reads YAML; an own key beats a merged one', () => {
  const text =
    'routes:\n  - &cluster\n    name: a\n    kind: cluster\n    exclude: [old.example.com]\n    cidrs: [10.96.0.0/16]\n  - <<: *cluster\n    name: b\n    cidrs: [10.97.0.0/16]\n  - <<: [{kind: direct}, {include: [lan.example.com]}]\n    name: c\n';
  const cfg = parse(text);
  assert.deepEqual(
    cfg.routes.map((r) => [r.name, r.kind, r.exclude, r.include, r.cidrs, r.origin]),
    [
      ['a', 'cluster', ['old.example.com'], [], ['10.96.0.0/16'], 'config.yaml:2'],
      ['b', 'cluster', ['old.example.com'], [], ['10.97.0.0/16'], 'config.yaml:7'],
      ['c', 'direct', [], ['lan.example.com'], [], 'config.yaml:10'],
    ],
  );
  // A merged key the route's kind does not take is refused at the route that merged it.
  refuses(
    'routes:\n  - &c {name: a, kind: cluster, context: x}\n  - <<: *c\n    name: b\n    kind: direct\n',
    3,
    'routes[1].context',
    /unknown key in a direct route/,
  );
});

test('an ssh route names a Host of ~/.ssh/config and takes include, exclude and cidrs', () => {
  const cfg = parse(
    'routes:\n  - name: bettersmarter\n    kind: ssh\n    ssh: {host: management4.rma1}\n    include: [vcenter.bettersmarter.ch, storage.bettersmarter.ch]\n    exclude: [apps.c-prod01.example.net]\n    cidrs: [172.18.0.0/16]\n',
  );
  const route = cfg.routes[0]!;
  assert.equal(route.kind, 'ssh');
  if (route.kind !== 'ssh') return;
  assert.deepEqual(route.ssh, { host: 'management4.rma1' });
  assert.deepEqual(
    [route.include, route.exclude, route.cidrs],
    [['vcenter.bettersmarter.ch', 'storage.bettersmarter.ch'], ['apps.c-prod01.example.net'], ['172.18.0.0/16']],
  );
  assert.deepEqual((parse('routes: [{name: j, kind: ssh, ssh: {host: "admin@[fd00::1]:2222"}}]\n').routes[0] as { ssh: unknown }).ssh, {
    host: 'admin@[fd00::1]:2222',
  });
});

test('an ssh route without a usable ssh.host is refused with its line', () => {
  refuses('routes:\n  - name: j\n    kind: ssh\n', 2, 'routes[0]', /an ssh route needs ssh: \{ host: NAME \}/);
  refuses('routes:\n  - name: j\n    kind: ssh\n    ssh: jump\n', 4, 'routes[0].ssh', /must be a mapping with host/);
  refuses('routes:\n  - name: j\n    kind: ssh\n    ssh: {}\n', 4, 'routes[0].ssh.host', /is required/);
  refuses(
    'routes:\n  - name: j\n    kind: ssh\n    ssh:\n      host: jump\n      user: root\n',
    6,
    'routes[0].ssh.user',
    /unknown key in ssh \(allowed: host\)/,
  );
  refuses('routes:\n  - name: j\n    kind: ssh\n    ssh:\n      host: -oProxyCommand=sh\n', 5, 'routes[0].ssh.host', /is not an ssh host/);
  refuses(
    'routes:\n  - name: j\n    kind: ssh\n    ssh: {host: jump}\n    context: x\n',
    5,
    'routes[0].context',
    /unknown key in an ssh route \(allowed: name, kind, include, exclude, cidrs, ssh\)/,
  );
});

test('extra-ca: relative to the config file; --extra-ca beats it; extraCA, the old spelling, works with a warning', () => {
  const cfg = parseConfig('extra-ca: certs/corp-ca.pem\nroutes: [{name: a, kind: cluster}]\n', '/etc/proxyout/config.yaml', 'cluster.local');
  assert.equal(cfg.extraCA, '/etc/proxyout/certs/corp-ca.pem');
  assert.equal(cfg.deprecations, undefined);
  const old = parseConfig('routes: [{name: a, kind: cluster}]\nextraCA: certs/corp-ca.pem\n', '/etc/proxyout/config.yaml', 'cluster.local');
  assert.equal(old.extraCA, '/etc/proxyout/certs/corp-ca.pem');
  assert.deepEqual(tableFrom(old, flags()).deprecations, ['/etc/proxyout/config.yaml:2: "extraCA" is now "extra-ca"; the old spelling still works']);
  assert.throws(() => parseConfig('extraCA: a.pem\nextra-ca: b.pem\n', 'config.yaml', 'cluster.local'), /config\.yaml:1: extraCA: give "extra-ca" only/);
  assert.equal(tableFrom(cfg, flags()).extraCA, '/etc/proxyout/certs/corp-ca.pem');
  assert.equal(tableFrom(cfg, flags({ extraCA: '/tmp/other.pem' })).extraCA, '/tmp/other.pem');
  assert.equal(tableFrom(parse('routes: [{name: a, kind: cluster}]\n'), flags()).extraCA, undefined);
  refuses('extraCA: [a.pem]\n', 1, 'extraCA', /must be a non-empty string/);
});
