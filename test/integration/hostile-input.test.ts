// Hostile input against the real proxy process: truncated and malformed handshakes, zero and
// oversized lengths, random bytes, giant heads, slowloris dribbling and names that try to escape,
// over SOCKS5, SOCKS4a and HTTP. Each case gets a bounded answer (a reply, or a close within the
// handshake timeout), and afterwards the proxy still serves a normal request.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { splitHostPort } from '../helpers/socks-client.js';

const HANDSHAKE_MS = 1000;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--handshake-timeout',
    `${HANDSHAKE_MS}ms`,
  ]);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await cluster?.close();
  assert.equal(code, 0, 'the proxy survived everything and exits 0');
});

// After every case: still serving, and nothing reached the catch-all error paths.
afterEach(async () => {
  const r = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop:8080/']);
  assert.equal(r.code, 0, `still serving: ${r.stderr}`);
  assert.match(r.stdout, /hello from web-/);
  assert.deepEqual(
    proxy.logs.filter((l) => Number(l.level) >= 50),
    [],
    'no error-level log lines',
  );
});

interface Outcome {
  reply: Buffer;
  closed: boolean;
  ms: number;
}

/** Sends parts (gapMs apart), optionally FIN, and collects the answer until the proxy ends or closes, or waitMs. */
async function exchange(addr: string, parts: Buffer[], opts: { gapMs?: number; end?: boolean; waitMs?: number } = {}): Promise<Outcome> {
  const [host, port] = splitHostPort(addr);
  const s = net.connect({ host, port, allowHalfOpen: true });
  s.on('error', () => undefined);
  await once(s, 'connect');
  const started = Date.now();
  const chunks: Buffer[] = [];
  let closed = false;
  s.on('data', (c: Buffer) => chunks.push(c));
  // The proxy's FIN is its last word (we keep our side open, as a hostile client would).
  const done = new Promise<void>((resolve) => {
    const finish = () => {
      closed = true;
      resolve();
    };
    s.once('end', finish);
    s.once('close', finish);
  });
  for (const [i, part] of parts.entries()) {
    if (closed) break;
    if (i > 0 && opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
    s.write(part);
  }
  if (opts.end && !closed) s.end();
  // Cleared once decided: a timer left running kept the file's process alive after its last test.
  let bound: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise((r) => (bound = setTimeout(r, opts.waitMs ?? HANDSHAKE_MS + 2000)))]);
  clearTimeout(bound);
  s.destroy();
  return { reply: Buffer.concat(chunks), closed, ms: Date.now() - started };
}

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);
const bytewise = (buf: Buffer): Buffer[] => [...buf].map((x) => b(x));
const status = (o: Outcome): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(o.reply.toString('latin1'))?.[1] ?? 0);
const socks5Domain = (name: Buffer | string, port = 8080): Buffer => {
  const n = typeof name === 'string' ? Buffer.from(name, 'utf8') : name;
  return Buffer.concat([b(5, 1, 0), b(5, 1, 0, 3, n.length), n, b(port >> 8, port & 0xff)]);
};
const socks4a = (name: Buffer | string, port = 8080): Buffer =>
  Buffer.concat([b(4, 1, port >> 8, port & 0xff, 0, 0, 0, 1), Buffer.from('u\0'), typeof name === 'string' ? Buffer.from(name, 'utf8') : name, b(0)]);

/** Seeded bytes (xorshift32), so a failure replays exactly. */
function randomBytes(n: number, seed: number): Buffer {
  let x = seed >>> 0 || 1;
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

describe('SOCKS: truncated, zero and oversized', () => {
  test('truncated greetings are dropped on FIN and on the handshake deadline', async () => {
    const partials = [b(5), b(5, 3, 0), b(5, 1, 0, 5, 1, 0, 3), b(4, 1, 0)];
    for (const partial of partials) {
      const fin = await exchange(proxy.socks!, [partial], { end: true });
      assert.ok(fin.closed, `FIN after ${partial.toString('hex')}`);
    }
    const silent = await Promise.all(partials.map((partial) => exchange(proxy.socks!, [partial])));
    for (const [i, o] of silent.entries()) assert.ok(o.closed && o.ms < HANDSHAKE_MS + 1500, `deadline after ${partials[i]!.toString('hex')}: ${o.ms} ms`);
  });

  test('zero methods, zero-length name, port 0; 255 methods', async () => {
    assert.deepEqual([...(await exchange(proxy.socks!, [b(5, 0)])).reply], [5, 0xff]);
    assert.deepEqual([...(await exchange(proxy.socks!, [socks5Domain('')])).reply.subarray(0, 4)], [5, 0, 5, 1]);
    assert.deepEqual([...(await exchange(proxy.socks!, [socks5Domain('web.shop', 0)])).reply.subarray(0, 4)], [5, 0, 5, 1]);
    const many = Buffer.concat([b(5, 255), Buffer.from(Array.from({ length: 255 }, (_, i) => i + 1))]);
    assert.deepEqual([...(await exchange(proxy.socks!, [many])).reply], [5, 0xff]);
  });

  test('oversized fields: a 255-byte name, a 300-byte SOCKS4 USERID, a 300-byte SOCKS4a name', async () => {
    assert.equal((await exchange(proxy.socks!, [socks5Domain('a'.repeat(255))])).reply[3], 0x02);
    const userid = Buffer.concat([b(4, 1, 0, 80, 10, 0, 0, 1), Buffer.alloc(300, 0x41)]);
    assert.equal((await exchange(proxy.socks!, [userid])).reply[1], 0x5b);
    assert.equal((await exchange(proxy.socks!, [socks4a('a'.repeat(300))])).reply[1], 0x5b);
  });

  test('unknown address type, BIND, UDP ASSOCIATE', async () => {
    assert.equal((await exchange(proxy.socks!, [b(5, 1, 0, 5, 1, 0, 7, 1, 2, 3, 4, 0, 80)])).reply[3], 0x08);
    assert.equal((await exchange(proxy.socks!, [b(5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80)])).reply[3], 0x07);
    assert.equal((await exchange(proxy.socks!, [b(5, 1, 0, 5, 3, 0, 1, 1, 2, 3, 4, 0, 80)])).reply[3], 0x07);
  });

  test('10k random bytes, bare and behind a SOCKS5 or SOCKS4 version byte', async () => {
    for (const [i, prefix] of [b(), b(5), b(4), b(5, 1, 0)].entries()) {
      const o = await exchange(proxy.socks!, [Buffer.concat([prefix, randomBytes(10_000, 1000 + i)])]);
      assert.ok(o.closed, `closed (prefix ${prefix.toString('hex')})`);
    }
  });

  test('slowloris: a valid handshake dribbled byte by byte is cut at the deadline', async () => {
    const o = await exchange(proxy.socks!, bytewise(socks5Domain('web.shop')), { gapMs: 150, waitMs: 6000 });
    assert.ok(o.closed && o.ms < HANDSHAKE_MS + 1000, `cut after ${o.ms} ms`);
  });
});

describe('names that try to escape', () => {
  const names: Array<string | Buffer> = [
    '..',
    '.',
    '../../etc/passwd',
    'web.shop/../kube-system',
    'web..shop',
    'web.shop%00.evil.com',
    '%00',
    'wéb.shop',
    'web.shop.svc.cluster.local\u202e',
    `${'a'.repeat(63)}b.shop`,
    `${'x'.repeat(200)}.svc.cluster.local`,
  ];

  test('over SOCKS5 and SOCKS4a: refused, never a stream', async () => {
    for (const name of names) {
      const five = await exchange(proxy.socks!, [socks5Domain(name)]);
      assert.ok(five.reply.length >= 4 && five.reply[3] !== 0, `SOCKS5 ${JSON.stringify(name.toString())}: ${five.reply.toString('hex')}`);
      const four = await exchange(proxy.socks!, [socks4a(name)]);
      assert.equal(four.reply[1], 0x5b, `SOCKS4a ${JSON.stringify(name.toString())}`);
    }
    assert.equal((await exchange(proxy.socks!, [socks4a(`${'a'.repeat(300)}.shop`)])).reply[1], 0x5b);
    // SOCKS5 carries a length, so an embedded NUL is part of the name: refused. In SOCKS4a the NUL
    // ends the name, so the request is for web.shop and the rest is payload, not a longer name.
    assert.equal((await exchange(proxy.socks!, [socks5Domain(Buffer.from('web.shop\0.evil.com'))])).reply[3], 0x04);
    const four = await exchange(proxy.socks!, [socks4a(Buffer.from('web.shop\0.evil.com'))], { waitMs: 300 });
    assert.equal(four.reply[1], 0x5a);
  });

  test('over HTTP CONNECT and absolute-form: refused with a 4xx/5xx', async () => {
    const targets = ['..:80', 'web.shop%00.evil.com:8080', '%00:80', 'wéb.shop:8080', `${'a'.repeat(300)}:80`, 'web.shop/../x:8080', '[::1%25eth0]:80'];
    for (const t of targets) {
      const c = status(await exchange(proxy.http!, [Buffer.from(`CONNECT ${t} HTTP/1.1\r\nHost: ${t}\r\n\r\n`)]));
      assert.ok(c >= 400, `CONNECT ${t}: ${c}`);
      const f = status(await exchange(proxy.http!, [Buffer.from(`GET http://${t}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)]));
      assert.ok(f >= 400, `GET http://${t}/: ${f}`);
    }
    // URL tricks resolve to the real host, never to the one that merely appears in the text.
    assert.equal(status(await exchange(proxy.http!, [Buffer.from('GET http://web.shop:8080@evil.example/ HTTP/1.1\r\nConnection: close\r\n\r\n')])), 403);
    assert.equal(status(await exchange(proxy.http!, [Buffer.from('GET http://evil.example\\@web.shop:8080/ HTTP/1.1\r\n\r\n')])), 400);
  });

  test('no request to the API server carried an escaped path', () => {
    const paths = Object.keys(cluster.sim.counters.byPath);
    assert.deepEqual(
      paths.filter((p) => /\.\.|%2f|%00|%5c|\\/i.test(p)),
      [],
    );
  });
});

describe('HTTP: malformed, oversized and slow', () => {
  test('10k random bytes: 400 or a close, never a hang', async () => {
    for (const seed of [7, 8, 9]) {
      const o = await exchange(proxy.http!, [randomBytes(10_000, seed)]);
      assert.ok(o.closed, `seed ${seed}`);
      assert.ok(o.reply.length === 0 || status(o) === 400, `seed ${seed}: ${o.reply.subarray(0, 40).toString('latin1')}`);
    }
  });

  test('giant heads: one huge header, thousands of headers, a huge URL → 431', async () => {
    const heads = [
      `GET http://web.shop:8080/ HTTP/1.1\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`,
      `GET http://web.shop:8080/ HTTP/1.1\r\n${Array.from({ length: 5000 }, (_, i) => `X-H${i}: v`).join('\r\n')}\r\n\r\n`,
      `GET http://web.shop:8080/${'p'.repeat(64 * 1024)} HTTP/1.1\r\n\r\n`,
      `CONNECT web.shop:8080 HTTP/1.1\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`,
    ];
    for (const head of heads) assert.equal(status(await exchange(proxy.http!, [Buffer.from(head)])), 431, head.slice(0, 40));
  });

  test('zero, negative, huge and conflicting body lengths', async () => {
    const bad = [
      'Content-Length: 99999999999999999999999',
      'Content-Length: -1',
      'Content-Length: 1, 2',
      'Content-Length: 5\r\nTransfer-Encoding: chunked',
      'Transfer-Encoding: gzip, chunked, identity\r\nTransfer-Encoding: chunked',
    ];
    for (const h of bad)
      assert.equal(status(await exchange(proxy.http!, [Buffer.from(`POST http://web.shop:8080/echo HTTP/1.1\r\n${h}\r\n\r\nhello`)])), 400, h);
    const chunk = await exchange(proxy.http!, [
      Buffer.from('POST http://web.shop:8080/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nx\r\n'),
    ]);
    assert.ok(chunk.closed, 'an absurd chunk size ends the connection');
    const empty = await exchange(proxy.http!, [Buffer.from('POST http://web.shop:8080/echo HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')]);
    assert.equal(status(empty), 200);
  });

  test('slowloris: a request head dribbled byte by byte gets 408 at the deadline', async () => {
    const head = Buffer.from('GET http://web.shop:8080/ HTTP/1.1\r\nHost: web.shop\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n');
    const o = await exchange(proxy.http!, bytewise(head), { gapMs: 100, waitMs: 8000 });
    assert.equal(status(o), 408);
    assert.ok(o.closed && o.ms < HANDSHAKE_MS + 1500, `cut after ${o.ms} ms`);
  });
});
