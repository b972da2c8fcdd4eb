// A tunnel that breaks after the request's stream opened: the 502 and the log line name the route
// as an open failure's do (the router's prefix), not only the pod.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { UpstreamApiError } from '../../src/core/errors.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, quietContext } from './socks-fixtures.test.js';

test('a tunnel that broke before the answer: the 502 names the route it was on', async (t) => {
  const opener = new FakeOpener({
    'web.shop': async () => {
      // The request goes out; then the tunnel is lost (the pod deleted, a keepalive unanswered).
      const stream = new Duplex({
        read() {},
        write(_chunk, _enc, cb) {
          cb();
          setImmediate(() => stream.destroy(new UpstreamApiError('port-forward tunnel to shop/web-0 broke: the pod is gone')));
        },
      });
      return { stream, via: 'shop/web-0:8080', route: 'staging', transport: 'spdy' };
    },
  });
  const ctx = quietContext(opener, 2000);
  const listener = await startHttpListener(LOOPBACK, 0, ctx);
  t.after(() => listener.close(100));
  const answer = await new Promise<string>((resolve, reject) => {
    const s = net.connect(listener.address.port, LOOPBACK);
    let text = '';
    s.on('data', (c: Buffer) => (text += c.toString('latin1')));
    s.on('end', () => resolve(text));
    s.on('error', reject);
    s.write('GET http://web.shop/ HTTP/1.1\r\nHost: web.shop\r\nConnection: close\r\n\r\n');
  });
  assert.match(answer, /^HTTP\/1\.1 502 /);
  assert.match(answer, /kubectl-proxyout: route staging: port-forward tunnel to shop\/web-0 broke: the pod is gone\n$/);
  assert.equal(ctx.stats.snapshot().lastFailure?.message, 'route staging: port-forward tunnel to shop/web-0 broke: the pod is gone');
});
