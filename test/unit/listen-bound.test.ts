// A listen host counts as loopback only if the address actually bound is loopback: `*.localhost`
// passes the text check, but resolves through /etc/hosts or DNS to whatever is configured there.
// Here the resolver is made to answer 0.0.0.0 for *.localhost, in this process only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dns from 'node:dns';
import net from 'node:net';
import { ProxyAuth, requireCredentialsOffLoopback } from '../../src/auth/credentials.js';
import { StartupError } from '../../src/core/errors.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { startForwardListener } from '../../src/listeners/forward-server.js';
import { FakeOpener, quietContext } from './socks-fixtures.test.js';

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

function resolveLocalhostNamesTo(address: string, t: { after(fn: () => void): void }): void {
  const real = dns.lookup;
  (dns as { lookup: unknown }).lookup = (host: string, options: unknown, callback?: LookupCallback) => {
    const cb = (typeof options === 'function' ? options : callback) as LookupCallback;
    const family = net.isIP(address);
    // Node ≥ 22's net.Server.listen asks for every address ({ all: true }); Node 20 for one.
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
    if (host.endsWith('.localhost')) return process.nextTick(() => (all ? cb(null, [{ address, family }]) : cb(null, address, family)));
    return (real as (...args: unknown[]) => void)(host, options, callback);
  };
  t.after(() => ((dns as { lookup: unknown }).lookup = real));
}

test('a *.localhost name that binds a non-loopback address is refused without credentials', async (t) => {
  resolveLocalhostNamesTo('0.0.0.0', t);
  // The text check alone lets it through: that is what the bound-address check is for.
  assert.doesNotThrow(() => requireCredentialsOffLoopback([{ flag: '--listen-http', host: 'proxy.localhost', port: 0 }], false));
  const ctx = quietContext(new FakeOpener({}));
  for (const [start, flag] of [
    [startHttpListener, '--listen-http'],
    [startSocksListener, '--listen-socks'],
  ] as const) {
    await assert.rejects(start('proxy.localhost', 0, ctx), (err: unknown) => {
      assert.ok(err instanceof StartupError);
      assert.match(err.message, new RegExp(`^${flag} proxy\\.localhost:\\d+ bound 0\\.0\\.0\\.0:\\d+, which is not a loopback address.*--proxy-auth-file`));
      return true;
    });
  }
  // With credentials the same address is allowed.
  ctx.auth = new ProxyAuth({ username: 'u', password: 'p' });
  const listener = await startHttpListener('proxy.localhost', 0, ctx);
  assert.equal(listener.address.address, '0.0.0.0');
  await listener.close(0);
});

test('a *.localhost name that binds loopback needs no credentials', async (t) => {
  resolveLocalhostNamesTo('127.0.0.1', t);
  const listener = await startSocksListener('proxy.localhost', 0, quietContext(new FakeOpener({})));
  assert.equal(listener.address.address, '127.0.0.1');
  await listener.close(0);
});

test('a port mapping on a *.localhost name that binds a non-loopback address is refused, even with credentials', async (t) => {
  resolveLocalhostNamesTo('0.0.0.0', t);
  const ctx = quietContext(new FakeOpener({}));
  ctx.auth = new ProxyAuth({ username: 'u', password: 'p' });
  const target = { host: 'db.shop', port: 5432, type: 'domain' as const };
  await assert.rejects(startForwardListener('db.localhost', 0, target, ctx, '--forward db.localhost:0=db.shop:5432'), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(
      err.message,
      /^--forward db\.localhost:0=db\.shop:5432: db\.localhost bound 0\.0\.0\.0:\d+, which is not a loopback address; a port mapping cannot authenticate its clients/,
    );
    return true;
  });
});
