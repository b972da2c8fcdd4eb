// How logs and the live page name a client: IPv4 clients of a dual-stack listener as IPv4.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { clientName } from '../../src/listeners/server-base.js';

test('a dual-stack listener names an IPv4 client 127.0.0.1:PORT, an IPv6 one [::1]:PORT', async (t) => {
  const accepted: string[] = [];
  const server = net.createServer((s) => {
    accepted.push(clientName(s));
    s.destroy();
  });
  server.listen(0, '::');
  await once(server, 'listening');
  t.after(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  for (const host of ['127.0.0.1', '::1']) {
    const c = net.connect(port, host);
    await once(c, 'close');
  }
  assert.equal(accepted.length, 2);
  assert.match(accepted[0]!, /^127\.0\.0\.1:\d+$/);
  assert.match(accepted[1]!, /^\[::1\]:\d+$/);
});
