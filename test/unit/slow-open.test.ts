// An endpoint whose stream does not open in a few seconds (a hung kubelet, a node cut off) is left
// for the next one; but only once per connection, so that a slow API path (every tunnel takes
// seconds) does not spend the connect timeout on cuts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { PodStreams } from '../../src/routes/cluster/pod-streams.js';
import type { Resolver } from '../../src/routes/cluster/resolver.js';
import { createLogger } from '../../src/core/log.js';
import type { OpenOptions, PodPort, Transport } from '../../src/tunnel/transport.js';

/** Every open takes `delayMs` (Infinity: never answers), or fails with the signal's reason. */
function slowTransport(delayMs: (pod: string) => number): Transport & { opened: string[] } {
  const opened: string[] = [];
  return {
    name: 'fake',
    opened,
    open(target: PodPort, options: OpenOptions): Promise<Duplex> {
      opened.push(target.pod);
      return new Promise((resolve, reject) => {
        const ms = delayMs(target.pod);
        const timer = Number.isFinite(ms) ? setTimeout(() => resolve(new Duplex({ read() {}, write: (_c, _e, cb) => cb() })), ms) : undefined;
        options.signal.addEventListener('abort', () => (clearTimeout(timer), reject(options.signal.reason)), { once: true });
      });
    },
    openTunnels: () => 0,
    close: async () => undefined,
  };
}

const plan = (...pods: string[]) => ({ label: 'service ns/web:80', candidates: pods.map((pod) => ({ namespace: 'ns', pod, port: 80 })) });
const streams = (t: Transport) => new PodStreams('test', {} as Resolver, t, createLogger('silent'), { confirmMs: 0, slowOpenMs: 100 });

test('an endpoint that never opens is left after the slow-open time for the next', async () => {
  const t = slowTransport((pod) => (pod === 'a' ? Infinity : 10));
  const opened = await streams(t).openPlan(plan('a', 'b', 'c'), AbortSignal.timeout(2000));
  assert.deepEqual(t.opened, ['a', 'b']);
  opened.stream.destroy();
});

test('when every endpoint is slow, one is cut and the next gets the rest of the connect time', async () => {
  // Five endpoints whose tunnels take 250 ms each, a connect timeout of 600 ms: cutting each in
  // turn at 100 ms left the last 200 ms, and the connection failed.
  const t = slowTransport(() => 250);
  const opened = await streams(t).openPlan(plan('a', 'b', 'c', 'd', 'e'), AbortSignal.timeout(600));
  assert.deepEqual(t.opened, ['a', 'b']);
  opened.stream.destroy();
});
