// Port mapping and unix-socket parsing, the config file's `forward:` key, the ready lines'
// examples, the client source of unix-socket clients, and --forward in managed settings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import path from 'node:path';
import { forwardListenProblem, parseForwardSpec, unixListenPath } from '../../src/core/address.js';
import { ConfigError, parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { forwardExample, readyLines } from '../../src/cli/ready.js';
import { proxyEnvironment } from '../../src/cli/exec-env.js';
import { statusTable } from '../../src/cli/status-table.js';
import { sourceBucket } from '../../src/auth/source.js';
import { socketDir, unixSocketPath } from '../../src/state/paths.js';
import { settingDifferences } from '../../src/managed/settings.js';
import { planStart } from '../../src/proxy/startup-checks.js';
import type { DaemonOptions, ProxyEntry } from '../../src/managed/store.js';
import { proxyStatusFixture } from '../helpers/proxy-status.js';

test('mappings: [ADDR:]LPORT=TARGET:PORT, ADDR 127.0.0.1 by default, any target form', () => {
  assert.deepEqual(parseForwardSpec('5432=db.shop:5432'), {
    listen: { host: '127.0.0.1', port: 5432 },
    target: { host: 'db.shop', port: 5432, type: 'domain' },
    text: '5432=db.shop:5432',
  });
  assert.deepEqual(parseForwardSpec('0=10.96.0.7:6379').target, { host: '10.96.0.7', port: 6379, type: 'ipv4' });
  assert.deepEqual(parseForwardSpec('[::1]:8080=[fd00::7]:80').listen, { host: '::1', port: 8080 });
  assert.deepEqual(parseForwardSpec('[::1]:8080=[fd00::7]:80').target, { host: 'fd00::7', port: 80, type: 'ipv6' });
  assert.deepEqual(parseForwardSpec('localhost:0=web.shop.svc.cluster.local:80').listen, { host: 'localhost', port: 0 });
  for (const [bad, why] of [
    ['5432', /missing "="/],
    ['5432=db.shop', /target "db.shop" is not HOST:PORT/],
    ['5432=db.shop:0', /port from 1 to 65535/],
    ['70000=db.shop:5432', /local port "70000"/],
    ['=db.shop:5432', /empty listen address/],
    ['::1:80=db:5432', /brackets/],
    ['db:5432', /missing "="/],
    ['ab=db:5432', /missing ":PORT"/],
    ['[::1=db:5432', /missing "]"/],
  ] as const) {
    assert.throws(
      () => parseForwardSpec(bad),
      // One example, the mapping's: not the listen address's beside it.
      (err: Error) => why.test(err.message) && err.message.split('(expected ').length <= 2,
      bad,
    );
  }
});

test('a mapping off loopback is refused, whatever else is given', () => {
  assert.equal(forwardListenProblem(parseForwardSpec('127.0.0.2:0=db:5432')), undefined);
  assert.equal(forwardListenProblem(parseForwardSpec('[::1]:0=db:5432')), undefined);
  assert.match(forwardListenProblem(parseForwardSpec('0.0.0.0:5432=db:5432'))!, /not a loopback address: a port mapping cannot authenticate its clients/);
  assert.match(forwardListenProblem(parseForwardSpec('192.168.1.5:5432=db:5432'))!, /192\.168\.1\.5/);
});

test('unix listen addresses: unix:PATH, unix: alone and bare names in the state directory', () => {
  assert.equal(unixListenPath('127.0.0.1:1080'), undefined);
  assert.equal(unixListenPath('unix:'), '');
  assert.equal(unixListenPath('unix:/run/p.sock'), '/run/p.sock');
  assert.equal(unixSocketPath('', 'socks', '/state'), '/state/socks.sock');
  assert.equal(unixSocketPath('', 'http', '/state'), '/state/http.sock');
  assert.equal(unixSocketPath('mine.sock', 'socks', '/state'), '/state/mine.sock');
  assert.equal(unixSocketPath('/run/user/1000/p.sock', 'socks', '/state'), '/run/user/1000/p.sock');
  // No shell expands a tilde after "unix:": the home, not a directory named ~ where the command ran.
  assert.equal(unixSocketPath('~/p.sock', 'socks', '/state'), path.join(homedir(), 'p.sock'));
  assert.throws(() => unixSocketPath(`/${'x'.repeat(120)}`, 'socks', '/state'), /too long for a unix socket/);
  // A state directory whose path a URL cannot carry raw (macOS: Application Support): unix: and
  // bare names go to a private directory under the temporary one (else /tmp); explicit paths stay.
  const mac = '/Users/me/Library/Application Support/kubectl-proxyout';
  const place = { tmp: '/var/folders/x1/abc_d/T/', uid: 501 };
  assert.equal(socketDir(mac, place), '/var/folders/x1/abc_d/T/kubectl-proxyout-501');
  assert.equal(unixSocketPath('', 'socks', mac, place), '/var/folders/x1/abc_d/T/kubectl-proxyout-501/socks.sock');
  assert.equal(unixSocketPath('prod.sock', 'socks', mac, place), '/var/folders/x1/abc_d/T/kubectl-proxyout-501/prod.sock');
  assert.equal(unixSocketPath(`${mac}/mine.sock`, 'socks', mac, place), `${mac}/mine.sock`);
  assert.equal(socketDir('/home/josé/.local/state/kubectl-proxyout', { tmp: '/tmp/my tmp', uid: 1000 }), '/tmp/kubectl-proxyout-1000');
  assert.equal(
    socketDir('/home/me/.local/state/kubectl-proxyout', place),
    '/home/me/.local/state/kubectl-proxyout',
    'a plain state directory keeps its sockets',
  );
});

test('config file: forward is a list of mappings, each checked on its own line', () => {
  const config = parseConfig('forward:\n  - "5432=db.shop:5432"\n  - 127.0.0.1:0=redis.cache:6379\n', 'c.yaml', 'cluster.local');
  assert.deepEqual(config.forwards, ['5432=db.shop:5432', '127.0.0.1:0=redis.cache:6379']);
  assert.deepEqual(tableFrom(config, { contexts: [], clusterDomain: 'cluster.local', currentContext: 'kind' }).forwards, config.forwards);
  const refuses = (text: string, line: number, key: string, why: RegExp) =>
    assert.throws(
      () => parseConfig(text, 'c.yaml', 'cluster.local'),
      (err: unknown) => err instanceof ConfigError && err.line === line && err.key === key && why.test(err.message),
    );
  refuses('forward: "5432=db:5432"\n', 1, 'forward', /must be a list of port mappings/);
  refuses('direct: true\nforward:\n  - 5432=db:5432\n  - 5433\n', 4, 'forward[1]', /must be a non-empty string|missing "="/);
  refuses('forward:\n  - "5433=db"\n', 2, 'forward[0]', /target "db" is not HOST:PORT/);
  refuses('forward:\n  - "0.0.0.0:5433=db:5432"\n', 2, 'forward[0]', /not a loopback address/);
  refuses('forwards: []\n', 1, 'forwards', /unknown key in the top level; did you mean "forward"\? \(allowed: direct, routes, extra-ca, forward\)/);
});

test('ready lines: one per mapping with the bound port and an example by the target’s port', () => {
  const at = (port: number) => ({ address: '127.0.0.1', family: 'IPv4', port });
  assert.equal(forwardExample(at(5000), 'db.shop:5432'), 'psql -h 127.0.0.1 -p 5000');
  assert.equal(forwardExample(at(5001), 'redis.cache:6379'), 'redis-cli -p 5001');
  assert.equal(forwardExample({ address: '::1', port: 5001 }, 'redis.cache:6379'), 'redis-cli -h ::1 -p 5001');
  assert.equal(forwardExample(at(5002), 'mysql.shop:3306'), 'mysql -h 127.0.0.1 -P 5002');
  assert.equal(forwardExample(at(5003), 'mongo.shop:27017'), 'mongosh --port 5003');
  assert.equal(forwardExample(at(5004), 'kafka.shop:9092'), 'nc 127.0.0.1 5004');
  assert.equal(forwardExample(at(5005), 'web.shop:8080'), 'curl http://127.0.0.1:5005/');
  assert.equal(forwardExample(at(5006), 'api.shop:443'), 'curl --connect-to api.shop:443:127.0.0.1:5006 https://api.shop/');
  const lines = readyLines({ context: 'c', namespace: 'n', socks: at(1080), forwards: [{ address: at(41234), target: 'db.shop:5432' }] });
  assert.ok(lines.includes('kubectl-proxyout: port 127.0.0.1:41234 → db.shop:5432 (psql -h 127.0.0.1 -p 41234)'), lines.join('\n'));
});

test('ready lines and exec variables for unix sockets: curl’s socks5h://localhost/PATH, no HTTP_PROXY', () => {
  const socks = { address: '/run/p/s.sock', family: 'unix', port: 0 };
  const http = { address: '/run/p/h.sock', family: 'unix', port: 0 };
  const lines = readyLines({ context: 'c', namespace: 'n', socks, http });
  assert.ok(lines.includes('export ALL_PROXY=socks5h://localhost/run/p/s.sock'));
  assert.ok(!lines.some((l) => l.startsWith('export HTTP')));
  const env = proxyEnvironment({ socks, http }, { username: 'u', password: 'p w' }, []);
  assert.equal(env.ALL_PROXY, 'socks5h://u:p%20w@localhost/run/p/s.sock');
  assert.equal(env.HTTP_PROXY, undefined);
  assert.match(env.NO_PROXY!, /^localhost,127\.0\.0\.1,::1(,|$)/);
});

test('a listener on a scoped link-local address: the proxy URLs write its zone as %25 (RFC 6874), the human lines as bound', () => {
  const socks = { address: 'fe80::1%eth0', family: 'IPv6', port: 1080 };
  const http = { address: 'fe80::1%eth0', family: 'IPv6', port: 3128 };
  const lines = readyLines({ context: 'c', namespace: 'n', socks, http });
  assert.ok(lines.includes('kubectl-proxyout: SOCKS5 proxy on [fe80::1%eth0]:1080 (context c, namespace n)'), lines.join('\n'));
  assert.ok(lines.includes("export ALL_PROXY='socks5h://[fe80::1%25eth0]:1080'"), lines.join('\n'));
  assert.ok(lines.includes("export https_proxy='http://[fe80::1%25eth0]:3128'"), lines.join('\n'));
  const env = proxyEnvironment({ socks, http }, { username: 'u', password: 'p' }, []);
  assert.equal(env.ALL_PROXY, 'socks5h://u:p@[fe80::1%25eth0]:1080');
  assert.equal(env.HTTP_PROXY, 'http://u:p@[fe80::1%25eth0]:3128');
  const row = statusTable([proxyStatusFixture({ context: 'c', namespace: 'n', server: 's', socks: '[fe80::1%eth0]:1080', http: '[fe80::1%eth0]:3128' })])[1]!;
  assert.match(row, / socks5h:\/\/\[fe80::1%25eth0\]:1080,http:\/\/\[fe80::1%25eth0\]:3128 /);
});

test('unix-socket clients are one throttle source, "unix"', () => {
  assert.equal(sourceBucket('unix'), 'unix');
  assert.equal(sourceBucket('127.0.0.5'), 'loopback');
});

test('--forward in managed settings compares the list', () => {
  const options = (forwards?: string[]): DaemonOptions => ({
    clusterDomain: 'cluster.local',
    logLevel: 'info',
    connectTimeoutMs: 1,
    handshakeTimeoutMs: 1,
    shutdownGraceMs: 1,
    ...(forwards ? { forwards } : {}),
  });
  const entry = { id: 'x', options: options(['0=web:80']) } as ProxyEntry;
  const asked = (forwards?: string[]) => ({ options: options(forwards), explicitFlags: new Set(['forward']) });
  assert.deepEqual(settingDifferences(entry, asked(['0=web:80'])), []);
  assert.deepEqual(settingDifferences(entry, asked(['0=web:80', '0=db:5432'])), ['--forward (running: 0=web:80, asked: 0=web:80 0=db:5432)']);
  assert.deepEqual(settingDifferences({ ...entry, options: options() }, asked(['0=web:80'])), ['--forward (running: off, asked: 0=web:80)']);
});

test("a mapping on our own listener's fixed port is refused by name before anything binds", () => {
  const table = tableFrom(parseConfig('', 'c.yaml', 'cluster.local'), { contexts: ['kind'], clusterDomain: 'cluster.local', currentContext: 'kind' });
  const plan = (listenSocks: string, listenHttp: string | undefined, forwards: string[]) =>
    planStart({ listenSocks, listenHttp, forwards, table, clusterDomain: 'cluster.local', proxyAuth: { username: 'u', password: 'p', source: 'file' } });
  assert.throws(
    () => plan('127.0.0.1:15000', undefined, ['15000=db:5432']),
    /^StartupError: --forward 15000=db:5432: 127\.0\.0\.1:15000 is already used by --listen-socks 127\.0\.0\.1:15000$/,
  );
  assert.throws(() => plan('127.0.0.1:0', '0.0.0.0:3128', ['3128=db:5432']), /already used by --listen-http 0\.0\.0\.0:3128$/);
  assert.throws(() => plan('[::]:1080', undefined, ['[::1]:1080=db:5432']), /already used by --listen-socks \[::\]:1080$/);
  // Another port, another address of the port, or port 0: no clash.
  assert.equal(plan('127.0.0.1:15000', undefined, ['15001=db:5432', '127.0.0.2:15000=db:5432', '0=db:5432']).forwards.length, 3);
  assert.equal(plan('0.0.0.0:15000', undefined, ['[::1]:15000=db:5432']).forwards.length, 1, 'an IPv4 wildcard leaves ::1 free');
  // localhost takes 127.0.0.1 and ::1 both.
  assert.throws(() => plan('[::1]:15000', undefined, ['localhost:15000=db:5432']), /already used by --listen-socks \[::1\]:15000$/);
  assert.throws(
    () => plan('127.0.0.1:0', undefined, ['15001=db:5432', 'localhost:15001=db:5432']),
    /localhost:15001 is already used by the mapping 15001=db:5432$/,
  );
  assert.throws(() => plan('127.0.0.1:0', undefined, ['15001=db:5432', '15001=db:5432']), /^StartupError: --forward 15001=db:5432: given twice$/);
});

test("a config file's mapping is named by its file and index in start errors, not as a --forward flag the user never gave", () => {
  const table = tableFrom(parseConfig('forward: ["15010=web:80", "15010=db:5432"]\n', '/etc/px/c.yaml', 'cluster.local'), {
    contexts: ['kind'],
    clusterDomain: 'cluster.local',
    currentContext: 'kind',
  });
  const plan = (listenSocks: string, forwards?: string[]) =>
    planStart({
      listenSocks,
      forwards,
      table,
      config: '/etc/px/c.yaml',
      clusterDomain: 'cluster.local',
      proxyAuth: { username: 'u', password: 'p', source: 'file' },
    });
  assert.throws(
    () => plan('127.0.0.1:0'),
    /^StartupError: \/etc\/px\/c\.yaml: forward\[1\] 15010=db:5432: 127\.0\.0\.1:15010 is already used by the mapping 15010=web:80$/,
  );
  assert.throws(() => plan('127.0.0.1:15010'), /^StartupError: \/etc\/px\/c\.yaml: forward\[0\] 15010=web:80: .* already used by --listen-socks/);
  // Flags come first; the file's mapping on a flag's port names both.
  assert.throws(() => plan('127.0.0.1:0', ['15010=x:1']), /^StartupError: \/etc\/px\/c\.yaml: forward\[0\] 15010=web:80: .* by the mapping 15010=x:1$/);
  assert.throws(() => plan('127.0.0.1:0', ['0.0.0.0:0=x:1']), /^StartupError: --forward 0\.0\.0\.0:0=x:1: /);
  assert.throws(() => plan('127.0.0.1:0', ['15010=web:80']), /^StartupError: \/etc\/px\/c\.yaml: forward\[0\] 15010=web:80: given twice \(also --forward\)$/);
});

test('--listen-http on the fixed port of --listen-socks is refused by name before anything binds', () => {
  const table = tableFrom(parseConfig('', 'c.yaml', 'cluster.local'), { contexts: ['kind'], clusterDomain: 'cluster.local', currentContext: 'kind' });
  const plan = (listenSocks: string, listenHttp: string) =>
    planStart({ listenSocks, listenHttp, table, clusterDomain: 'cluster.local', proxyAuth: { username: 'u', password: 'p', source: 'file' } });
  assert.throws(
    () => plan('127.0.0.1:1080', '127.0.0.1:1080'),
    /^StartupError: --listen-http 127\.0\.0\.1:1080: that port is already --listen-socks's; the SOCKS and HTTP listeners each need a port of their own$/,
  );
  assert.throws(() => plan('0.0.0.0:1080', '127.0.0.1:1080'), /already --listen-socks's/);
  // Port 0 (each its own free port), another port or another address: no clash.
  assert.ok(plan('127.0.0.1:0', '127.0.0.1:0').http);
  assert.ok(plan('127.0.0.1:1080', '127.0.0.1:3128').http);
  assert.ok(plan('127.0.0.1:1080', '127.0.0.2:1080').http);
});
