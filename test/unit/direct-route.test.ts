import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type dns from 'node:dns';
import { once } from 'node:events';
import { ConnectionRefusedError, ConnectTimeoutError, HostUnreachableError, NotAllowedError, SocksReply, StartupError } from '../../src/core/errors.js';
import type { HostPort } from '../../src/core/address.js';
import { DirectRoute, assertDirectAllowed, dialError } from '../../src/routes/direct/route.js';
import { RejectRoute } from '../../src/routes/reject/route.js';
import { parseCidr, type Cidr } from '../../src/core/cidr.js';
import { buildTable, type BuildSettings } from '../../src/proxy/build-table.js';
import { createLogger } from '../../src/core/log.js';
import { tableFromYaml } from '../helpers/routing-decisions.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { startForwardListener } from '../../src/listeners/forward-server.js';
import { connectClient, LOOPBACK as LOOPBACK_HOST, quietContext, Reader } from './socks-fixtures.test.js';

/** An echo server on a loopback address; counts the connections it accepted. */
async function echoServer(host: string): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  let accepted = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.pipe(s);
  });
  server.listen(0, host);
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(host: string): Promise<number> {
  const s = net.createServer().listen(0, host);
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  await once(s, 'close');
  return port;
}

type Lookup = (host: string, cb: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void) => void;
const fixedLookup =
  (addresses: string[]): Lookup =>
  (_h, cb) =>
    cb(
      null,
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
// The test servers are on loopback, which a direct route dials only when its allow list names it.
const LOOPBACK = ['127.0.0.0/8', '::1/128'].map((b) => parseCidr(b));
const route = (listeners: HostPort[] = [], lookup?: Lookup, localAddresses?: () => string[], allow: Cidr[] = LOOPBACK) =>
  new DirectRoute('direct', { ownListeners: () => listeners, lookup, localAddresses, allow });
const signal = () => AbortSignal.timeout(5000);

async function roundTrip(stream: NodeJS.ReadWriteStream & { destroy(): void }): Promise<string> {
  stream.write('ping');
  const [data] = (await once(stream, 'data')) as [Buffer];
  stream.destroy();
  return data.toString();
}

test('dials IP literals and names (OS resolver) on loopback and relays bytes', async () => {
  const v4 = await echoServer('127.0.0.1');
  const v6 = await echoServer('::1');
  try {
    const a = await route().dial('127.0.0.1', v4.port, signal());
    assert.equal(a.via, `direct 127.0.0.1:${v4.port}`);
    assert.equal(await roundTrip(a.stream as net.Socket), 'ping');
    const b = await route().dial('::1', v6.port, signal());
    assert.equal(b.via, `direct [::1]:${v6.port}`);
    assert.equal(await roundTrip(b.stream as net.Socket), 'ping');
    const c = await route().dial('localhost', v4.port, signal()); // /etc/hosts, through getaddrinfo
    assert.equal(await roundTrip(c.stream as net.Socket), 'ping');
    // open() dials the host as the client wrote it, through the same resolver the client would use.
    const d = await route().open(
      { destination: { host: 'localhost', port: v4.port, type: 'domain' }, frontEnd: 'socks5', client: 'test', signal: signal() },
      undefined,
      signal(),
    );
    assert.equal(await roundTrip(d.stream as net.Socket), 'ping');
  } finally {
    await v4.close();
    await v6.close();
  }
});

test("a client's FIN through SOCKS to a direct route: an answer that comes after the tear-down grace still arrives whole", { timeout: 15_000 }, async () => {
  // A server that answers once the request is complete (its FIN), and only after a while, as a
  // slow query does: TCP's half-close, which the relay must not cut short.
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.resume();
    s.on('end', () => setTimeout(() => s.end('answer after 2.5 s'), 2_500));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const direct = route();
  const listener = await startSocksListener(LOOPBACK_HOST, 0, quietContext({ open: (req) => direct.open(req, undefined, req.signal) }));
  try {
    const client = await connectClient(listener.address.port);
    const reader = new Reader(client);
    client.write(Buffer.from([5, 1, 0]));
    await reader.read(2);
    client.write(Buffer.concat([Buffer.from([5, 1, 0, 1, 127, 0, 0, 1]), Buffer.from([port >> 8, port & 0xff])]));
    assert.equal((await reader.read(10))[1], 0, 'connected');
    client.end('the request');
    assert.equal((await reader.rest(10_000)).toString(), 'answer after 2.5 s');
    client.destroy();
  } finally {
    await listener.close(0);
    server.close();
  }
});

test('a server that half-closes first (greets, then FIN) through a port mapping to a direct route still gets what the client sends after', async () => {
  // As TCP splices: the far end's FIN ends one direction only; the client may still answer.
  let received = 0;
  let done: (bytes: number) => void = () => {};
  const gotAll = new Promise<number>((resolve) => (done = resolve));
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.end('hello\n');
    s.on('data', (c: Buffer) => (received += c.length));
    s.on('end', () => done(received));
    s.on('error', () => done(-1));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const direct = route();
  const mapping = await startForwardListener(
    LOOPBACK_HOST,
    0,
    { host: '127.0.0.1', port, type: 'ipv4' },
    quietContext({ open: (req) => direct.open(req, undefined, req.signal) }),
  );
  try {
    const client = await connectClient(mapping.address.port);
    const reader = new Reader(client);
    assert.equal((await reader.rest()).toString(), 'hello\n', "the server's greeting, then its FIN");
    client.end(Buffer.alloc(100_000, 1));
    assert.equal(await gotAll, 100_000);
    client.destroy();
  } finally {
    await mapping.close(0);
    server.close();
  }
});

test('Happy Eyeballs: a name whose IPv4 address refuses is reached over IPv6', async () => {
  const v6 = await echoServer('::1');
  try {
    const r = route([], fixedLookup(['127.0.0.1', '::1']));
    const opened = await r.dial('dual.test', v6.port, signal());
    assert.equal(opened.via, `direct [::1]:${v6.port}`);
    assert.equal(await roundTrip(opened.stream as net.Socket), 'ping');
  } finally {
    await v6.close();
  }
});

test('failures map to SOCKS/HTTP replies: unresolvable 0x04, refused 0x05, timeout 0x06', async () => {
  const notFound: Lookup = (h, cb) => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: 'ENOTFOUND' }), []);
  await assert.rejects(
    route([], notFound).dial('nowhere.test', 80, signal()),
    (e: Error) =>
      e instanceof HostUnreachableError && e.socksReply === SocksReply.hostUnreachable && /cannot resolve nowhere\.test \(ENOTFOUND\)/.test(e.message),
  );
  const port = await closedPort('127.0.0.1');
  await assert.rejects(
    route().dial('127.0.0.1', port, signal()),
    (e: Error) => e instanceof ConnectionRefusedError && e.socksReply === SocksReply.connectionRefused,
  );
  // Every address of a name refusing (an AggregateError from Happy Eyeballs) is still "refused".
  const port6 = await closedPort('::1');
  await assert.rejects(route([], fixedLookup(['127.0.0.1', '::1'])).dial('both.test', port6, signal()), ConnectionRefusedError);
  // A resolver that never answers: the caller's deadline ends the dial.
  // (A ref'd timer: AbortSignal.timeout's is unref'd, and nothing else would keep this test alive.)
  const hanging: Lookup = () => {};
  const deadline = new AbortController();
  setTimeout(() => deadline.abort(new DOMException('deadline', 'TimeoutError')), 50);
  await assert.rejects(
    route([], hanging).dial('slow.test', 80, deadline.signal),
    (e: Error) => e instanceof ConnectTimeoutError && e.socksReply === SocksReply.ttlExpired && /timed out/.test(e.message),
  );
  // Kernel-level failures.
  const err = (code: string) => Object.assign(new Error(code), { code });
  assert.ok(dialError(err('ETIMEDOUT'), 'h', 1) instanceof ConnectTimeoutError);
  assert.ok(dialError(err('EHOSTUNREACH'), 'h', 1) instanceof HostUnreachableError);
  assert.ok(dialError(err('ENETUNREACH'), 'h', 1) instanceof HostUnreachableError);
  assert.ok(dialError(new AggregateError([err('ECONNREFUSED'), err('ENETUNREACH')]), 'h', 1) instanceof ConnectionRefusedError);
  assert.ok(dialError(new AggregateError([err('ETIMEDOUT'), err('ECONNREFUSED')]), 'h', 1) instanceof ConnectTimeoutError);
});

test('messages name an IPv6 destination in brackets before its port', async () => {
  const err = (code: string) => Object.assign(new Error(code), { code });
  assert.equal(dialError(err('ECONNREFUSED'), 'fd01::2', 8001).message, '[fd01::2]:8001 refused the connection');
  assert.equal(dialError(err('EHOSTUNREACH'), 'fd01::2', 80).message, '[fd01::2]:80 is unreachable (EHOSTUNREACH)');
  assert.match(dialError(err('ETIMEDOUT'), '2001:db8::1', 443).message, /^connecting to \[2001:db8::1\]:443 timed out/);
  assert.equal(dialError(err('ECONNREFUSED'), '10.0.0.1', 80).message, '10.0.0.1:80 refused the connection');
  // The deadline passed before the dial: the timeout names it as well.
  const late = AbortSignal.abort(new DOMException('deadline', 'TimeoutError'));
  await assert.rejects(
    route().dial('fd01::2', 80, late),
    (e: Error) => e instanceof ConnectTimeoutError && e.message === 'connecting to [fd01::2]:80 timed out',
  );
  // Its own listener, reached through a dual-stack wildcard.
  const self = route([{ host: '::', port: 1080 }], undefined, () => ['fd01::1']);
  await assert.rejects(
    self.dial('fd01::1', 1080, signal()),
    (e: Error) => e instanceof NotAllowedError && /^\[fd01::1\]:1080 is this proxy's own listener/.test(e.message),
  );
  // The article of a refused kind reads right.
  await assert.rejects(route([], undefined, undefined, []).dial('::127.0.0.1', 80, signal()), (e: Error) =>
    /^::7f00:1 is a deprecated IPv4-compatible IPv6 address: /.test(e.message),
  );
  // An exposed IPv6 listener in the startup refusal.
  assert.throws(
    () => assertDirectAllowed(tableFromYaml('direct: true\nroutes: [{name: a, kind: cluster}]\n'), [{ flag: '--listen-socks', host: '::', port: 1080 }], false),
    /reaches --listen-socks \[::\]:1080 connect/,
  );
});

test('by default refuses loopback, "this host", link-local and metadata addresses, after DNS', async () => {
  const v4 = await echoServer('127.0.0.1');
  const v6 = await echoServer('::1');
  const notAllowed = (re: RegExp) => (e: Error) =>
    e instanceof NotAllowedError && e.socksReply === SocksReply.notAllowed && re.test(e.message) && /allow list/.test(e.message);
  try {
    const strict = (lookup?: Lookup) => route([], lookup, undefined, []);
    const literals: Array<[string, RegExp]> = [
      ['127.0.0.1', /^127\.0\.0\.1 is a loopback address/],
      ['127.1.2.3', /loopback/],
      ['::ffff:127.0.0.1', /^127\.0\.0\.1 is a loopback/],
      ['::1', /^::1 is a loopback/],
      ['0.0.0.0', /"this host"/],
      ['::', /unspecified/],
      ['169.254.169.254', /cloud instance-metadata/],
      ['::ffff:169.254.169.254', /cloud instance-metadata/],
      ['169.254.10.1', /link-local/],
      ['fe80::1', /link-local/],
      ['fd00:ec2::254', /cloud instance-metadata/],
      ['fd20:ce::254', /cloud instance-metadata/],
      ['100.100.100.200', /cloud instance-metadata/],
      ['::127.0.0.1', /IPv4-compatible/],
    ];
    for (const [host, re] of literals) await assert.rejects(strict().dial(host, v4.port, signal()), notAllowed(re), host);
    // Judged on the addresses the name resolves to: the OS resolver's localhost, a name pointing at metadata.
    await assert.rejects(strict().dial('localhost', v4.port, signal()), notAllowed(/^localhost resolves only to .*127\.0\.0\.1.* \(loopback address\)/));
    await assert.rejects(
      strict(fixedLookup(['169.254.169.254'])).dial('metadata.google.internal', 80, signal()),
      notAllowed(/metadata\.google\.internal resolves only to 169\.254\.169\.254 \(cloud instance-metadata address\)/),
    );
    await assert.rejects(strict(fixedLookup(['fe80::1%eth0'])).dial('printer.local', 80, signal()), notAllowed(/link-local/));
    assert.equal(v4.accepted() + v6.accepted(), 0, 'nothing was dialled');
    // A name with a refused and an allowed address dials only the allowed one: ::1 is allowed here, 127.0.0.1 not.
    const only6 = route([], fixedLookup(['127.0.0.1', '::1']), undefined, [parseCidr('::1')]);
    const v6same = await echoServer('::1');
    const v4same = net.createServer((s) => s.destroy()).listen(v6same.port, '127.0.0.1');
    await once(v4same, 'listening');
    let v4hits = 0;
    v4same.on('connection', () => v4hits++);
    const opened = await only6.dial('mixed.test', v6same.port, signal());
    assert.equal(opened.via, `direct [::1]:${v6same.port}`);
    assert.equal(await roundTrip(opened.stream as net.Socket), 'ping');
    assert.equal(v4hits, 0, 'the refused address was not dialled');
    v4same.close();
    await v6same.close();
    // The allow list opts back in, block by block.
    const allowed = route([], undefined, undefined, [parseCidr('127.0.0.0/8')]);
    assert.equal(await roundTrip((await allowed.dial('127.0.0.1', v4.port, signal())).stream as net.Socket), 'ping');
    await assert.rejects(allowed.dial('::1', v6.port, signal()), notAllowed(/loopback/));
    // Other private addresses are not this machine's: they are the LANs a direct route is for.
    const policyOnly = strict(fixedLookup(['10.0.0.1']));
    assert.equal((policyOnly as unknown as { addressRefusal(a: string): string | undefined }).addressRefusal('10.0.0.1'), undefined);
    assert.equal((policyOnly as unknown as { addressRefusal(a: string): string | undefined }).addressRefusal('192.168.1.1'), undefined);
  } finally {
    await v4.close();
    await v6.close();
  }
});

test("a config file's direct route takes allow; the route built from it dials what it names", async () => {
  const table = tableFromYaml('routes: [{name: a, kind: cluster}, {name: lan, kind: direct, include: [lan], allow: [127.0.0.0/8, "::1"]}]\n');
  const spec = table.routes.find((r) => r.name === 'lan')!;
  assert.deepEqual(spec.kind === 'direct' && spec.allow, ['127.0.0.0/8', '::1/128']);
  // Built alone: the cluster route would need a kubeconfig.
  const built = buildTable(
    { ...table, routes: [spec], defaultRoute: undefined },
    { ownListeners: () => [] } as unknown as BuildSettings,
    createLogger('silent'),
  ).routes.get('lan') as DirectRoute;
  const v4 = await echoServer('127.0.0.1');
  try {
    assert.equal(await roundTrip((await built.dial('127.0.0.1', v4.port, signal())).stream as net.Socket), 'ping');
    await assert.rejects(built.dial('169.254.169.254', 80, signal()), NotAllowedError);
  } finally {
    await v4.close();
  }
  // The reject routes' cidrs reach the direct route built with them: localhost (127.0.0.1) is refused by name.
  const guarded = tableFromYaml(
    'routes: [{name: a, kind: cluster}, {name: lan, kind: direct, include: [localhost], allow: [127.0.0.0/8]}, {name: walled, kind: reject, cidrs: [127.0.0.1/32, "::1/128"]}]\n',
  );
  const lan = buildTable(
    { ...guarded, routes: guarded.routes.filter((r) => r.kind !== 'cluster'), defaultRoute: undefined },
    { ownListeners: () => [] } as unknown as BuildSettings,
    createLogger('silent'),
  ).routes.get('lan') as DirectRoute;
  await assert.rejects(lan.dial('localhost', 80, signal()), (e: Error) => e instanceof NotAllowedError && /which reject route walled refuses$/.test(e.message));
  assert.throws(
    () => tableFromYaml('routes: [{name: a, kind: cluster}, {name: lan, kind: direct, allow: [127.0.0.1/8]}]\n'),
    /routes\[1\]\.allow\[0\].*host bits set; did you mean 127\.0\.0\.0\/8/,
  );
  assert.throws(() => tableFromYaml('routes: [{name: a, kind: cluster, allow: [127.0.0.0/8]}]\n'), /allow/);
});

test('never dials its own listeners: by address, by name, and through wildcard binds', async () => {
  const own = await echoServer('127.0.0.1');
  try {
    const listeners = [{ host: '127.0.0.1', port: own.port }];
    const r = route(listeners, fixedLookup(['127.0.0.1']));
    for (const host of ['127.0.0.1', '::ffff:127.0.0.1', '0.0.0.0', 'me.test']) {
      await assert.rejects(r.dial(host, own.port, signal()), (e: Error) => e instanceof NotAllowedError && /own listener/.test(e.message), host);
    }
    assert.equal(own.accepted(), 0);
    // Another port on the same address is fine.
    const other = await echoServer('127.0.0.1');
    await (await r.dial('127.0.0.1', other.port, signal())).stream.destroy();
    await other.close();
  } finally {
    await own.close();
  }
  const local = () => ['192.0.2.10', 'fe80::1', '127.0.0.1', '::1'];
  const anyV4 = route([{ host: '0.0.0.0', port: 1080 }], undefined, local);
  assert.equal(anyV4.isOwnListener('127.0.0.5', 1080), true);
  assert.equal(anyV4.isOwnListener('192.0.2.10', 1080), true);
  assert.equal(anyV4.isOwnListener('::ffff:192.0.2.10', 1080), true);
  assert.equal(anyV4.isOwnListener('192.0.2.11', 1080), false);
  assert.equal(anyV4.isOwnListener('192.0.2.10', 1081), false);
  assert.equal(anyV4.isOwnListener('::1', 1080), false);
  const anyV6 = route([{ host: '::', port: 1080 }], undefined, local);
  assert.equal(anyV6.isOwnListener('::1', 1080), true);
  assert.equal(anyV6.isOwnListener('fe80::1', 1080), true);
  assert.equal(anyV6.isOwnListener('192.0.2.10', 1080), true); // dual-stack
  assert.equal(anyV6.isOwnListener('::', 1080), true);
  const loop6 = route([{ host: '::1', port: 1080 }], undefined, local);
  assert.equal(loop6.isOwnListener('0:0::1', 1080), true);
  assert.equal(loop6.isOwnListener('127.0.0.1', 1080), false);
});

test('direct pass-through is allowed only on loopback listeners or with proxy credentials', () => {
  const withDirect = tableFromYaml('direct: true\nroutes: [{name: a, kind: cluster}]\n');
  const directRoute = tableFromYaml('routes: [{name: a, kind: cluster}, {name: lan, kind: direct, include: [lan]}]\n');
  const without = tableFromYaml('routes: [{name: a, kind: cluster}]\n');
  const loopback = [
    { flag: '--listen-socks', host: '127.0.0.1', port: 1080 },
    { flag: '--listen-http', host: '::1', port: 3128 },
  ];
  const exposed = [...loopback, { flag: '--listen-http', host: '0.0.0.0', port: 3129 }];
  assertDirectAllowed(withDirect, loopback, false);
  assertDirectAllowed(withDirect, exposed, true);
  assertDirectAllowed(without, exposed, false);
  assert.throws(
    () => assertDirectAllowed(withDirect, exposed, false),
    (e: Error) => e instanceof StartupError && /route direct, config\.yaml:1\).*--listen-http 0\.0\.0\.0:3129.*--proxy-auth-file/.test(e.message),
  );
  assert.throws(() => assertDirectAllowed(directRoute, exposed, false), /route lan, config\.yaml:1/);
});

test('the reject route refuses with SOCKS 0x02 / HTTP 403', async () => {
  await assert.rejects(
    new RejectRoute('blocked').open(
      { destination: { host: 'ads.example.com', port: 443, type: 'domain' }, frontEnd: 'http-connect', client: 'x', signal: signal() },
      undefined,
      signal(),
    ),
    (e: Error) => e instanceof NotAllowedError && e.httpStatus === 403 && /ads\.example\.com is blocked by route blocked/.test(e.message),
  );
});

test("a name that resolves into a reject route's cidrs is refused as the address is; its other addresses are dialled", async () => {
  const echo = await echoServer('::1');
  try {
    const blocked = (addresses: string[]) =>
      new DirectRoute('direct', {
        ownListeners: () => [],
        lookup: fixedLookup(addresses),
        allow: LOOPBACK,
        rejected: [{ cidr: parseCidr('127.0.0.0/8'), route: 'blocked' }],
      });
    await assert.rejects(
      blocked(['127.0.0.1']).dial('vm.corp.test', echo.port, signal()),
      (e: Error) => e instanceof NotAllowedError && /^vm\.corp\.test resolves only to 127\.0\.0\.1, which reject route blocked refuses$/.test(e.message),
    );
    assert.equal(echo.accepted(), 0, 'nothing was dialled');
    const opened = await blocked(['127.0.0.1', '::1']).dial('both.corp.test', echo.port, signal());
    assert.equal(await roundTrip(opened.stream), 'ping');
    assert.match(opened.via, /\[::1\]/);
  } finally {
    await echo.close();
  }
});
