// errorMessage: Node writes a socket error's IPv6 address and port as "connect ECONNREFUSED ::1:9",
// the port run into the address; kubectl (Go) writes [::1]:9. What doctor, the start and the
// degraded route's reason (status, the stream failures) print.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { errorMessage } from '../../src/core/errors.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ApiReachability } from '../../src/cluster/api-reachability.js';
import { eventually } from '../helpers/cluster.js';

async function refusedAt(host: string): Promise<Error> {
  // A port just freed: nothing listens there.
  const server = net.createServer().listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  const socket = net.connect(port, host);
  const [err] = (await once(socket, 'error')) as [Error];
  return err;
}

test('a refused connection to an IPv6 address names it in brackets before the port', async () => {
  const err = await refusedAt('::1');
  const port = (err as unknown as { port: number }).port;
  assert.equal(err.message, `connect ECONNREFUSED ::1:${port}`, "Node's own words");
  assert.equal(errorMessage(err), `connect ECONNREFUSED [::1]:${port}`);
});

test('IPv4 addresses and other errors are left as they are', async () => {
  const err = await refusedAt('127.0.0.1');
  assert.equal(errorMessage(err), err.message);
  assert.match(errorMessage(err), /^connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
  assert.equal(errorMessage(new Error('fd00::1:80 as text')), 'fd00::1:80 as text');
  assert.equal(errorMessage('plain'), 'plain');
});

test("a degraded route's reason (the reachability probe's last error) brackets the API server's IPv6 address", async () => {
  const refused = await refusedAt('::1');
  const port = (refused as unknown as { port: number }).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://[::1]:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  const reach = new ApiReachability(new ApiConnection(kc, { env: {} }), 60_000);
  reach.suspect();
  await eventually(async () => reach.last?.answered === false, 5_000, 10);
  assert.equal(reach.last?.lastError, `connect ECONNREFUSED [::1]:${port}`);
});

test('a name with an address per family, both refusing: each attempt is named, not an empty message', async () => {
  // A port free in both families: [::] takes 127.0.0.1's too.
  const both = net.createServer().listen(0, '::');
  await once(both, 'listening');
  const { port } = both.address() as net.AddressInfo;
  both.close();
  await once(both, 'close');
  // As getaddrinfo answers for localhost where /etc/hosts has ::1 and 127.0.0.1 (Node then tries both).
  const lookup = ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) =>
    opts.all
      ? cb(null, [
          { address: '::1', family: 6 },
          { address: '127.0.0.1', family: 4 },
        ])
      : cb(null, '::1', 6)) as unknown as net.LookupFunction;
  const socket = net.connect({ host: 'dual.test', port, lookup, autoSelectFamily: true });
  const [err] = (await once(socket, 'error')) as [Error];
  assert.ok(err instanceof AggregateError, 'Node reports both attempts together');
  assert.equal(err.message, '', "Node's own message is empty");
  assert.equal(errorMessage(err), `connect ECONNREFUSED [::1]:${port}; connect ECONNREFUSED 127.0.0.1:${port}`);
});

test("OpenSSL's dump is said by its reason; plain HTTP where TLS was expected is named", async () => {
  // An https:// address whose port speaks plain HTTP (or a proxy that answered CONNECT, then in plain text).
  const server = net.createServer((s) => s.on('error', () => undefined).end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false });
  const [err] = (await once(socket, 'error')) as [Error];
  server.close();
  assert.match(err.message, /SSL routines/, "Node's own words");
  assert.equal(
    errorMessage(err),
    'TLS failed: the server answered with something other than TLS (wrong version number): an http:// address given as https://, or a proxy answering on its behalf?',
  );
  assert.equal(
    errorMessage(new Error('C0:error:0A000086:SSL routines:tls_post_process_server_certificate:certificate verify failed:x.c:1:')),
    'TLS failed: certificate verify failed',
  );
  // What a message adds around OpenSSL's words stays: the proxy it went through.
  assert.equal(
    errorMessage(new Error(`${err.message} (through proxy http://proxy.corp:3128, from HTTPS_PROXY)`)),
    'TLS failed: the server answered with something other than TLS (wrong version number): an http:// address given as https://, or a proxy answering on its behalf? (through proxy http://proxy.corp:3128, from HTTPS_PROXY)',
  );
});
