// A proxy under a low open-file limit (ulimit -n 256: a shell's, a container's): clients beyond
// what fits are refused with a SOCKS reply naming the limit, never reset unseen at accept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { binPath, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect, splitHostPort } from '../helpers/socks-client.js';
import { openStream, roundTrip, sleep, type OpenStream } from '../helpers/streams.js';

const LIMIT = 256;
/** More clients than the limit has files for. */
const CLIENTS = 280;

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

describe(`ulimit -n ${LIMIT}`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    // `ulimit -n` sets both limits: Node cannot raise its soft limit past this one.
    const command = ['/bin/sh', '-c', `ulimit -n ${LIMIT} && exec "$0" "$@"`, process.execPath, binPath];
    proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], { command });
  });
  after(async () => {
    await proxy?.stop();
  });

  test('held streams beyond what fits: each client is answered, the refusals name the limit, and it serves once they leave', async () => {
    const held: net.Socket[] = [];
    const answers = new Map<string, number>();
    // In small batches, as a browser opens them: a burst of simultaneous accepts beyond the
    // limit is dropped by the runtime before the proxy sees it.
    for (let i = 0; i < CLIENTS; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, () =>
          socks5Connect(proxy.socks!, 'echo.data', 7000).then(
            (r) => r,
            (err: NodeJS.ErrnoException) => ({ reply: `no reply (${err.code ?? err.message})`, socket: undefined }),
          ),
        ),
      );
      for (const r of batch) {
        const key = String(r.reply);
        answers.set(key, (answers.get(key) ?? 0) + 1);
        if (r.reply === 0) held.push(r.socket!);
        else r.socket?.destroy();
      }
    }
    assert.deepEqual(
      [...answers.keys()].filter((k) => k !== '0' && k !== '1'),
      [],
      'every client answered (0x00 or 0x01)',
    );
    const warned = proxy.logs.find((l) => l.openFileLimit === LIMIT);
    const cap = warned?.maxStreams as number;
    assert.ok(cap > 0 && 2 * cap < LIMIT, `at most half the limit: ${cap}`);
    assert.deepEqual(Object.fromEntries(answers), { 0: cap, 1: CLIENTS - cap }, 'the first streams open, the rest are refused');
    const refused = proxy.logs.find((l) => l.reason === 'overloaded');
    assert.match(String(refused?.msg), new RegExp(`the limit is ${cap}, as the open-file limit \\(ulimit -n\\) is ${LIMIT}`));
    for (const s of held) s.destroy();
    const again = await eventually(
      async () => {
        const r = await socks5Connect(proxy.socks!, 'web.shop', 8080);
        if (r.reply !== 0) r.socket.destroy();
        return r.reply === 0 && r.socket;
      },
      10_000,
      250,
    );
    again.destroy();
  });
});

/** A proxy process whose open-file limit is LIMIT: `ulimit -n` sets both limits, and Node cannot raise its soft one past it. */
function limitedProxy(args: string[]): Promise<ProxyProcess> {
  const command = ['/bin/sh', '-c', `ulimit -n ${LIMIT} && exec "$0" "$@"`, process.execPath, binPath];
  // Idle clients stay until the test lets them go.
  return startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--handshake-timeout', '60s', ...args], { command });
}

/** Connections that send nothing, opened until the proxy closes one at once (it has no room for it). */
async function fillWithIdle(socks: string): Promise<net.Socket[]> {
  const [host, port] = splitHostPort(socks);
  const idle: net.Socket[] = [];
  for (let dropped = false; !dropped;) {
    const batch = Array.from({ length: 10 }, () => net.connect(port, host).on('error', () => undefined));
    await sleep(100);
    for (const s of batch) if (s.destroyed || s.readableEnded) dropped = true;
    idle.push(...batch.filter((s) => !s.destroyed && !s.readableEnded));
    assert.ok(idle.length < LIMIT, 'a connection is closed before the limit');
  }
  return idle;
}

describe(`ulimit -n ${LIMIT}, idle clients`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    proxy = await limitedProxy([]);
  });
  after(async () => {
    await proxy?.stop();
  });

  test('cannot take the files the proxy needs: past their share they are refused, with a line, and a new tunnel still opens', async () => {
    const idle = await fillWithIdle(proxy.socks!);
    idle.pop()!.destroy();
    await sleep(200);
    // Its stream needs a tunnel, and the tunnel a connection to the API server.
    const s = await openStream(proxy.socks!, 'echo.data', 7000);
    assert.equal((await roundTrip(s, Buffer.from('ping'))).toString(), 'ping');
    s.socket.destroy();
    const refused = proxy.logs.find((l) => String(l.msg).startsWith('client connection refused'));
    assert.match(
      String(refused?.msg),
      new RegExp(`^client connection refused: ${idle.length + 1} are open, all the open-file limit \\(ulimit -n\\) of ${LIMIT} leaves for clients$`),
    );
    for (const c of idle) c.destroy();
  });
});

describe(`ulimit -n ${LIMIT}, a WebSocket per stream`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    proxy = await limitedProxy(['--transport', 'websocket']);
  });
  after(async () => {
    await proxy?.stop();
  });

  test("streams' upstream connections count against the clients' share: the files kept back stay free, and the route stays ready", async () => {
    // Each stream holds its client and its WebSocket. Counting clients alone, streams and idle
    // clients together took the files kept back, and new clients were reset unseen.
    const held: OpenStream[] = [];
    for (let i = 0; i < 90; i += 10) held.push(...(await Promise.all(Array.from({ length: 10 }, () => openStream(proxy.socks!, 'echo.data', 7000)))));
    const idle = await fillWithIdle(proxy.socks!);
    const refused = await eventually(async () => proxy.logs.find((l) => String(l.msg).startsWith('client connection refused')), 5_000, 50);
    assert.match(String(refused.msg), /^client connection refused: \d+ are open \(and 90 streams' upstream connections\), all the open-file limit/);
    assert.ok(idle.length + 2 * held.length <= LIMIT - 32, `clients and streams keep 32 files back (${idle.length} idle, ${held.length} streams)`);
    for (const c of idle.splice(0, 5)) c.destroy();
    await sleep(300);
    // A new stream needs a WebSocket beside its client: the files are there.
    const s = await openStream(proxy.socks!, 'echo.data', 7000);
    assert.equal((await roundTrip(s, Buffer.from('ping'))).toString(), 'ping');
    s.socket.destroy();
    assert.equal(
      proxy.logs.find((l) => String(l.msg).includes('route degraded')),
      undefined,
      'the route was never degraded',
    );
    for (const c of idle) c.destroy();
    for (const h of held) h.socket.destroy();
  });
});

describe(`ulimit -n ${LIMIT}, a WebSocket per stream, after plain-HTTP requests`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    proxy = await limitedProxy(['--transport', 'websocket', '--listen-http', '127.0.0.1:0']);
  });
  after(async () => {
    await proxy?.stop();
  });

  test('upstreams idle in the HTTP pool give their files to new streams: every client is answered, none reset', async () => {
    // 16 kept per host, a WebSocket (a file) each, for 4 s after their requests ended, and no
    // stream slot: uncounted, they took the files the cap had left for new streams (EMFILE).
    const hosts = ['web.shop:8080', 'api.shop:80', 'hello.default:80'];
    const [host, port] = splitHostPort(proxy.http!);
    const answers = await Promise.all(Array.from({ length: 48 }, (_, i) => plainGet(host, port, hosts[i % hosts.length]!)));
    assert.deepEqual(new Set(answers), new Set(['HTTP/1.1 200 OK']));
    const held: net.Socket[] = [];
    const replies = new Map<string, number>();
    for (let i = 0; i < 130; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, () =>
          socks5Connect(proxy.socks!, 'echo.data', 7000).then(
            (r) => r,
            (err: NodeJS.ErrnoException) => ({ reply: `no reply (${err.code ?? err.message})`, socket: undefined }),
          ),
        ),
      );
      for (const r of batch) {
        replies.set(String(r.reply), (replies.get(String(r.reply)) ?? 0) + 1);
        if (r.reply === 0) held.push(r.socket!);
        else r.socket?.destroy();
      }
    }
    const cap = proxy.logs.find((l) => l.openFileLimit === LIMIT)?.maxStreams as number;
    assert.deepEqual(Object.fromEntries(replies), { 0: cap, 1: 130 - cap }, 'the cap opens, the rest are told');
    assert.equal(
      proxy.logs.find((l) => /no file descriptor left/.test(String(l.msg))),
      undefined,
      'no stream failed for want of a file',
    );
    for (const s of held) s.destroy();
  });
});

/** One absolute-form GET on a connection of its own; resolves with the status line. */
function plainGet(proxyHost: string, proxyPort: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxyPort, proxyHost);
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(chunks).toString().split('\r\n')[0]!));
    s.write(`GET http://${target}/ HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`);
  });
}
