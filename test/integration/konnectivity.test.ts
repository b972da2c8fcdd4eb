// The konnectivity dialer against the simulated apiserver-network-proxy server, in both modes,
// over mutual TLS and over a unix socket: bulk data checked by sha256, echo with backpressure,
// the server's dial errors as the SOCKS/HTTP replies they map to, many concurrent streams, and a
// server restart in the middle of streams.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { randomBytes, createHash } from 'node:crypto';
import { createKonnectivityDialer, type KonnectivityDialer } from '../../src/konnectivity/dialer.js';
import { ProxyError, replyFor, SocksReply } from '../../src/core/errors.js';
import { deterministicSha256 } from '../sim/backends.js';
import { GUEST, drain, echoRoundTrip, startKonnectivityBed, type KonnectivityBed, type Transport } from '../helpers/konnectivity.js';

const signal = () => AbortSignal.timeout(10_000);

async function dialError(dialer: KonnectivityDialer, ip: string, port: number): Promise<ProxyError> {
  const err = await dialer.dial(ip, port, signal()).then(
    (s) => {
      s.destroy();
      return undefined;
    },
    (e: unknown) => e,
  );
  assert.ok(err instanceof ProxyError, `expected a ProxyError for ${ip}:${port}, got ${String(err)}`);
  return err;
}

const cases: Array<{ mode: 'grpc' | 'http-connect'; transport: Transport }> = [
  { mode: 'grpc', transport: 'tls' },
  { mode: 'grpc', transport: 'uds' },
  { mode: 'http-connect', transport: 'tls' },
  { mode: 'http-connect', transport: 'uds' },
];

for (const { mode, transport } of cases) {
  describe(`konnectivity ${mode} over ${transport === 'tls' ? 'mutual TLS' : 'a unix socket'}`, () => {
    let bed: KonnectivityBed;
    let dialer: KonnectivityDialer;

    before(async () => {
      bed = await startKonnectivityBed(mode, transport);
      dialer = await createKonnectivityDialer(bed.spec);
    });
    after(async () => {
      dialer.close();
      await bed.close();
    });

    it('guest addresses answer only through the server (a direct dial is refused)', async () => {
      const direct = await new Promise<string>((resolve) => {
        const s = net.connect(GUEST.echo.port, GUEST.echo.ip);
        s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
        s.once('connect', () => {
          s.destroy();
          resolve('connected');
        });
      });
      assert.equal(direct, 'ECONNREFUSED');
      const s = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal());
      assert.deepEqual(await echoRoundTrip(s, Buffer.from('ping')), Buffer.from('ping'));
      s.destroy();
    });

    it("carries bulk data intact to the far end's close (sha256)", async () => {
      const s = await dialer.dial(GUEST.bytes.ip, GUEST.bytes.port, signal());
      const got = await drain(s);
      assert.equal(got.length, bed.bytesSize);
      assert.equal(got.sha256, deterministicSha256(bed.bytesSize));
    });

    it('echoes 8 MiB both ways at once (backpressure), then closes on destroy', async () => {
      const payload = randomBytes(8 * 1024 * 1024);
      const s = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal());
      const back = await echoRoundTrip(s, payload);
      assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(payload).digest('hex'));
      const openBefore = bed.server.counters.open;
      s.destroy();
      for (let i = 0; i < 50 && bed.server.counters.open >= openBefore; i++) await new Promise((r) => setTimeout(r, 100));
      assert.ok(bed.server.counters.open < openBefore, 'the far connection closes after the stream is destroyed');
    });

    it('a reader that stops reading holds back the far end (backpressure)', async () => {
      const big = await startKonnectivityBed(mode, transport, { bytesSize: 256 * 1024 * 1024 });
      const slow = await createKonnectivityDialer(big.spec);
      try {
        const s = await slow.dial(GUEST.bytes.ip, GUEST.bytes.port, signal());
        await new Promise((r) => s.once('data', r)); // flowing, then stopped: the reader is full
        s.pause();
        let last = -1;
        // Wait until the source is held back: nothing more sent for a while.
        for (let i = 0; i < 100 && big.bytesSent() !== last; i++) {
          last = big.bytesSent();
          await new Promise((r) => setTimeout(r, 200));
        }
        assert.ok(big.bytesSent() < 64 * 1024 * 1024, `the source sent ${big.bytesSent()} bytes to a reader that stopped reading`);
        s.destroy();
      } finally {
        slow.close();
        await big.close();
      }
    });

    it("holds the client's FIN (the protocol cannot carry it): the answer written after it still arrives", async () => {
      const s = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal());
      const payload = randomBytes(256 * 1024);
      const back = echoRoundTrip(s, payload);
      s.end();
      assert.ok((await back).equals(payload));
      assert.equal(s.destroyed, false, 'the stream stays open for the answer');
      s.destroy();
    });

    it("a refused port is SOCKS 0x05 (connection refused), from the agent's text and from a real dial", async () => {
      for (const t of [GUEST.refused, GUEST.closedPort]) {
        const err = await dialError(dialer, t.ip, t.port);
        assert.equal(err.reason, 'connection-refused', err.message);
        assert.equal(replyFor(err).socks, SocksReply.connectionRefused);
        assert.equal(replyFor(err).http, 502);
        assert.equal(err.retryable, true);
      }
    });

    it('unroutable is 0x04 (host unreachable), a timed-out dial 0x06, no agent 0x01', async () => {
      const unreachable = await dialError(dialer, GUEST.unrouted.ip, GUEST.unrouted.port);
      assert.equal(replyFor(unreachable).socks, SocksReply.hostUnreachable, unreachable.message);
      const timeout = await dialError(dialer, GUEST.timeout.ip, GUEST.timeout.port);
      assert.equal(replyFor(timeout).socks, SocksReply.ttlExpired, timeout.message);
      assert.equal(replyFor(timeout).http, 504);
      bed.server.noAgent = true;
      try {
        const none = await dialError(dialer, GUEST.echo.ip, GUEST.echo.port);
        assert.equal(replyFor(none).socks, SocksReply.generalFailure, none.message);
        assert.match(none.message, /no agent/);
      } finally {
        bed.server.noAgent = false;
      }
    });

    it('a dial the client gives up is abandoned (grpc: DIAL_CLS) and reported as a timeout (0x06)', async () => {
      const cancelsBefore = bed.server.counters.dialCancels;
      const started = Date.now();
      const err = await dialer.dial(GUEST.blackHole.ip, GUEST.blackHole.port, AbortSignal.timeout(300)).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof ProxyError, String(err));
      assert.equal(replyFor(err).socks, SocksReply.ttlExpired);
      assert.ok(Date.now() - started < 5_000, 'the dial gives up when the signal says so, not when the agent does');
      if (mode === 'grpc') {
        for (let i = 0; i < 50 && bed.server.counters.dialCancels === cancelsBefore; i++) await new Promise((r) => setTimeout(r, 20));
        assert.equal(bed.server.counters.dialCancels, cancelsBefore + 1, 'the server got DIAL_CLS');
      }
    });

    it('100 concurrent streams each carry their own bytes', async () => {
      const streams = await Promise.all(Array.from({ length: 100 }, () => dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal())));
      const results = await Promise.all(
        streams.map(async (s, i) => {
          const payload = Buffer.concat([Buffer.from(`stream ${i} `), randomBytes(64 * 1024)]);
          const back = await echoRoundTrip(s, payload);
          s.destroy();
          return back.equals(payload);
        }),
      );
      assert.equal(results.filter(Boolean).length, 100);
    });

    it('a server restart ends open streams with an error, and new streams work afterwards', async () => {
      const streams = await Promise.all(Array.from({ length: 5 }, () => dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal())));
      for (const s of streams) assert.deepEqual(await echoRoundTrip(s, Buffer.from('before')), Buffer.from('before'));
      const ended = streams.map(
        (s) =>
          new Promise<unknown>((resolve) => {
            s.once('error', resolve);
            s.once('end', () => resolve('ended'));
            s.once('close', () => resolve('closed'));
            s.resume();
          }),
      );
      await bed.server.restart(200);
      // The bound's timer is cleared once decided: left running, it kept the file's process alive ~9 s after its last test.
      let bound: NodeJS.Timeout | undefined;
      const outcomes = (await Promise.race([
        Promise.all(ended),
        new Promise((_, reject) => (bound = setTimeout(() => reject(new Error('streams still open 10 s after the restart')), 10_000))),
      ]).finally(() => clearTimeout(bound))) as unknown[];
      for (const o of outcomes) assert.ok(o instanceof ProxyError || o === 'closed' || o === 'ended', `stream ended with ${String(o)}`);
      let fresh;
      for (let i = 0; i < 40 && !fresh; i++) {
        fresh = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, signal()).catch(() => undefined);
        if (!fresh) await new Promise((r) => setTimeout(r, 250));
      }
      assert.ok(fresh, 'a new stream opens after the restart');
      assert.deepEqual(await echoRoundTrip(fresh, Buffer.from('after')), Buffer.from('after'));
      fresh.destroy();
    });

    if (transport === 'tls') {
      it('refuses to talk without a client certificate the server trusts (mutual TLS)', async () => {
        const anonymous = await createKonnectivityDialer({ server: bed.spec.server, mode, ca: bed.spec.ca });
        try {
          const err = await dialError(anonymous, GUEST.echo.ip, GUEST.echo.port);
          assert.equal(err.reason, 'api-error', err.message);
          assert.equal(replyFor(err).socks, SocksReply.generalFailure);
        } finally {
          anonymous.close();
        }
      });
    }
  });
}

describe('konnectivity http-connect against a server that answers 503 to every failed dial', () => {
  it('still tells refused (0x05) from unreachable (0x04) by the body text', async () => {
    const bed = await startKonnectivityBed('http-connect', 'tls', { httpErrors: 'legacy' });
    const dialer = await createKonnectivityDialer(bed.spec);
    try {
      assert.equal(replyFor(await dialError(dialer, GUEST.refused.ip, GUEST.refused.port)).socks, SocksReply.connectionRefused);
      assert.equal(replyFor(await dialError(dialer, GUEST.unrouted.ip, GUEST.unrouted.port)).socks, SocksReply.hostUnreachable);
    } finally {
      dialer.close();
      await bed.close();
    }
  });
});
