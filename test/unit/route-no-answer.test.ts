// Which stream failures make a cluster route look at its path to the API server (routes/cluster/route.ts
// noAnswer): those without an HTTP answer only. An HTTP refusal (a 403, a kubelet's 500) must not
// make it probe and renew its watches, however many requests fail so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionRefusedError, ConnectTimeoutError, NotAllowedError, UpstreamApiError } from '../../src/core/errors.js';
import { TunnelRefusal } from '../../src/tunnel/spdy/tunnel.js';
import { noAnswer } from '../../src/routes/cluster/route.js';

const system = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), { code });

test('a timeout or a system error under an API failure is no answer; an HTTP refusal or a pod that refused is one', () => {
  assert.equal(noAnswer(new ConnectTimeoutError('port-forward tunnel to shop/web did not open in time')), true);
  assert.equal(noAnswer(new UpstreamApiError('port-forward tunnel to shop/web failed', { cause: system('ECONNREFUSED') })), true);
  assert.equal(noAnswer(new UpstreamApiError('port-forward tunnel to shop/web failed', { cause: system('ECONNRESET') })), true);
  assert.equal(
    noAnswer(new UpstreamApiError('refused by the API server (500)', { cause: new TunnelRefusal(500, '{"kind":"Status","message":"boom"}') })),
    false,
  );
  assert.equal(noAnswer(new UpstreamApiError('API server answered port-forward with subprotocol ""')), false);
  assert.equal(noAnswer(new NotAllowedError('forbidden')), false);
  assert.equal(noAnswer(new ConnectionRefusedError('pod shop/web:8080: connection refused')), false);
  assert.equal(noAnswer(new Error('not a ProxyError')), false);
});
