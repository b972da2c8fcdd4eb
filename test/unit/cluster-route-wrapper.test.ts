// When PodStreams wraps a stream in RetryBeforeFirstByte: only when there is another endpoint to
// move to. A warm SPDY stream to the only endpoint — called connected before the kubelet replied
// to its SYN_STREAMs — is the transport's own stream: a GOAWAY that crosses it is the transport's
// affair (spdy/goaway-replay.ts), and the route keeps no second stream layer, no plan and no copy
// of the client's bytes for the connection's life. With another endpoint, a stream the transport
// could not keep (it failed retryable) moves there with the client's bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { PodStreams } from '../../src/routes/cluster/pod-streams.js';
import type { Resolver } from '../../src/routes/cluster/resolver.js';
import { RetryBeforeFirstByte } from '../../src/routes/cluster/retry-stream.js';
import { ConnectionRefusedError, UpstreamApiError } from '../../src/core/errors.js';
import { MAX_REPLAY_BYTES } from '../../src/tunnel/transport.js';
import { createLogger } from '../../src/core/log.js';
import { SpdySession } from '../../src/tunnel/spdy/session.js';
import { SpdyPortForwardStream } from '../../src/tunnel/spdy/pf-stream.js';
import type { PodTunnel } from '../../src/tunnel/spdy/tunnel.js';
import type { OpenOptions, PodPort, Transport } from '../../src/tunnel/transport.js';
import { RecordingDuplex } from '../helpers/recording-duplex.js';

/** A transport that answers each open() with the next outcome: a stream, or an error to throw. */
function transport(outcomes: Array<(target: PodPort, options: OpenOptions) => Promise<Duplex>>): Transport & { opened: string[] } {
  const opened: string[] = [];
  return {
    name: 'fake',
    opened,
    async open(target: PodPort, options: OpenOptions): Promise<Duplex> {
      opened.push(target.pod);
      const next = outcomes.shift();
      if (!next) throw new Error('no more outcomes');
      return next(target, options);
    },
    openTunnels: () => 0,
    close: async () => undefined,
  };
}

/** A real SPDY port-forward stream on a tunnel whose kubelet has not replied yet. */
function spdyStream(target: PodPort, options: OpenOptions): Promise<Duplex> {
  const session = new SpdySession('client', { write: () => undefined, close: () => undefined });
  let ids = 0;
  const tunnel = {
    session,
    requestId: () => String(ids++),
    replies: { opened: () => undefined, replied: () => undefined },
    hold: () => undefined,
    awaitAnswer: () => false,
    buffered: 0,
    whenDrained: (cb: () => void) => cb(),
  };
  const hooks = { release: () => undefined, retire: () => undefined, reopen: () => Promise.reject(new Error('unused')) };
  return new SpdyPortForwardStream(tunnel as unknown as PodTunnel, target, createLogger('silent'), hooks).open(options);
}

const pod = (name: string): PodPort => ({ namespace: 'ns', pod: name, port: 80 });
const route = (t: Transport) => new PodStreams('test', {} as Resolver, t, createLogger('silent'), { confirmMs: 0 });
const plan = (...pods: string[]) => ({ label: 'service ns/web:80', candidates: pods.map(pod) });
const signal = () => AbortSignal.timeout(5000);
async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(pred(), what);
}

test("a warm SPDY stream to the only endpoint is the transport's own stream: no retry wrapper", async () => {
  let given: Duplex | undefined;
  const t = transport([async (target, options) => (given = await spdyStream(target, options))]);
  const opened = await route(t).openPlan(plan('a'), signal());
  assert.ok(given instanceof SpdyPortForwardStream);
  assert.ok(!(opened.stream instanceof RetryBeforeFirstByte), 'not wrapped');
  assert.equal(opened.stream, given, "the Duplex the route returns is the transport's own");
  opened.stream.destroy();
});

test("with another endpoint the stream is wrapped, and one the transport could not keep (GOAWAY, failed retryable) moves there with the client's bytes", async () => {
  const first = new RecordingDuplex();
  const second = new RecordingDuplex();
  const t = transport([async () => first, async () => second]);
  const opened = await route(t).openPlan(plan('a', 'b'), signal());
  assert.ok(opened.stream instanceof RetryBeforeFirstByte);
  opened.stream.write('GET / HTTP/1.1\r\n\r\n');
  await new Promise((r) => setImmediate(r));
  first.destroy(new UpstreamApiError('port-forward to ns/a:80: the kubelet closed the tunnel (GOAWAY) before it took the stream', { retryable: true }));
  await until(() => second.written.length > 0, 'replayed to the next endpoint');
  assert.deepEqual(t.opened, ['a', 'b'], "not the same endpoint again: that is the transport's to do");
  assert.equal(Buffer.concat(second.written).toString(), 'GET / HTTP/1.1\r\n\r\n');
  opened.stream.destroy();
});

test('a refusal that cannot move (the client sent more than is kept for a replay) still sends that endpoint last', async () => {
  const first = new RecordingDuplex();
  const t = transport([async () => first, async () => new RecordingDuplex()]);
  const streams = route(t);
  const opened = await streams.openPlan(plan('a', 'b'), signal());
  opened.stream.on('error', () => undefined);
  opened.stream.write(Buffer.alloc(MAX_REPLAY_BYTES + 1)); // an upload before the pod's first byte
  await new Promise((r) => setImmediate(r));
  first.destroy(new ConnectionRefusedError('pod ns/a:80: connection refused', { retryable: true }));
  await until(() => opened.stream.destroyed, 'the stream failed: too much to replay');
  assert.deepEqual(t.opened, ['a'], 'not moved');
  const next = await streams.openPlan(plan('a', 'b'), signal());
  assert.deepEqual(t.opened, ['a', 'b'], 'the endpoint that refused goes last');
  next.stream.destroy();
});
