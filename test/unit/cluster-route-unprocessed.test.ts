// ClusterRoute and streams the server never took (ProxyError.unprocessed: a SPDY GOAWAY crossed
// their SYN_STREAMs): they are opened again at the same endpoint — before moving on, a bounded
// number of times — also after they were called connected, with the client's bytes replayed; a
// stream that may still be turned away keeps the retry wrapper though no other endpoint is left.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { ClusterRoute } from '../../src/routing/cluster-route.js';
import type { Resolver } from '../../src/routing/resolver.js';
import { RetryBeforeFirstByte } from '../../src/routing/retry-stream.js';
import { UpstreamApiError } from '../../src/core/errors.js';
import { createLogger } from '../../src/core/log.js';
import type { OpenOptions, PodPort, Transport } from '../../src/tunnel/transport.js';

class FakeStream extends Duplex {
  readonly written: Buffer[] = [];
  constructor(readonly mayBeUnprocessed: boolean) {
    super({ allowHalfOpen: true });
  }
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.written.push(chunk);
    cb();
  }
}

const notTaken = () => new UpstreamApiError('the kubelet closed the tunnel (GOAWAY) before it took the stream', { unprocessed: true });

/** A transport that answers each open() with the next outcome: a stream, or an error to throw. */
function transport(outcomes: Array<FakeStream | Error>): Transport & { opened: string[] } {
  const opened: string[] = [];
  return {
    name: 'fake',
    opened,
    async open(target: PodPort, _options: OpenOptions): Promise<Duplex> {
      opened.push(target.pod);
      const next = outcomes.shift();
      if (!next) throw new Error('no more outcomes');
      if (next instanceof Error) throw next;
      return next;
    },
    openTunnels: () => 0,
    close: async () => undefined,
  };
}

const pod = (name: string): PodPort => ({ namespace: 'ns', pod: name, port: 80 });
const route = (t: Transport) => new ClusterRoute('test', {} as Resolver, t, createLogger('silent'), { confirmMs: 0 });
const plan = (...pods: string[]) => ({ label: 'service ns/web:80', candidates: pods.map(pod) });
const signal = () => AbortSignal.timeout(5000);
async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(pred(), what);
}

test('a stream the endpoint did not take is opened there again, at most twice, then the next endpoint', async () => {
  const t = transport([notTaken(), new FakeStream(false)]);
  const one = await route(t).openPlan(plan('a'), signal());
  assert.deepEqual(t.opened, ['a', 'a'], 'the only endpoint, again');
  assert.ok(one.stream instanceof FakeStream, 'taken: nothing left to move to, no wrapper');

  const t2 = transport([notTaken(), notTaken(), notTaken(), new FakeStream(false)]);
  await route(t2).openPlan(plan('a', 'b'), signal());
  assert.deepEqual(t2.opened, ['a', 'a', 'a', 'b']);

  const t3 = transport([notTaken(), notTaken(), notTaken()]);
  await assert.rejects(route(t3).openPlan(plan('a'), signal()), /GOAWAY/);
  assert.deepEqual(t3.opened, ['a', 'a', 'a']);
});

test('called connected, then not taken: opened again at the same endpoint with the client\'s bytes replayed', async () => {
  const first = new FakeStream(true);
  const second = new FakeStream(true);
  const t = transport([first, second]);
  const opened = await route(t).openPlan(plan('a'), signal());
  assert.ok(opened.stream instanceof RetryBeforeFirstByte, 'a stream that may still be turned away keeps the wrapper');
  opened.stream.write('GET / HTTP/1.1\r\n\r\n');
  await new Promise((r) => setImmediate(r));
  first.destroy(notTaken());
  await until(() => second.written.length > 0, 'replayed to the same endpoint');
  assert.deepEqual(t.opened, ['a', 'a']);
  assert.equal(Buffer.concat(second.written).toString(), 'GET / HTTP/1.1\r\n\r\n');
  let answer = '';
  opened.stream.on('data', (d: Buffer) => (answer += d));
  second.push('HTTP/1.1 200 OK\r\n\r\n');
  await until(() => answer === 'HTTP/1.1 200 OK\r\n\r\n', 'the answer');
  opened.stream.destroy();
});
