// The env lines the live page offers to copy (proxy/live.ts, proxy/client-env.ts): the ready
// lines' own `export` lines — NO_PROXY with the routes' API servers included — with the proxy's
// user name and a PASSWORD placeholder, never the password itself.
import { afterEach, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../src/core/log.js';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { StreamStats } from '../../src/listeners/stream-stats.js';
import type { Listener, ListenerContext } from '../../src/listeners/listener.js';
import type { RouteStatus } from '../../src/routes/route.js';
import { startLive, PASSWORD } from '../../src/proxy/live.js';
import { readyLines } from '../../src/cli/ready.js';
import type { FeedMessage } from '../../src/ui/feed.js';

const saved = { NO_PROXY: process.env.NO_PROXY, no_proxy: process.env.no_proxy };
beforeEach(() => {
  process.env.NO_PROXY = '.corp.example';
  delete process.env.no_proxy;
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved))
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
});

const socks = { kind: 'socks', address: { address: '127.0.0.1', family: 'IPv4', port: 1080 } } as unknown as Listener;
const http = { kind: 'http', address: { address: '127.0.0.1', family: 'IPv4', port: 3128 } } as unknown as Listener;
const routes: RouteStatus[] = [
  { name: 'prod', kind: 'cluster', state: 'ready', details: { server: 'https://API.prod.example:6443' } },
  { name: 'lab', kind: 'cluster', state: 'ready', details: { server: 'https://10.1.2.3:6443' } },
];

function snapshotInfo(ctx: Partial<ListenerContext>): Extract<FeedMessage, { type: 'snapshot' }> {
  const stats = new StreamStats(createLogger('silent'));
  const live = startLive(
    stats,
    [socks, http],
    ctx as ListenerContext,
    () => ({ context: 'prod', namespace: 'shop', clusterDomain: 'cluster.local' }),
    () => routes,
    false,
  );
  try {
    let snapshot: FeedMessage | undefined;
    live.feed.subscribe((m) => (snapshot ??= m))();
    assert.equal(snapshot?.type, 'snapshot');
    return snapshot as Extract<FeedMessage, { type: 'snapshot' }>;
  } finally {
    live.stop();
  }
}

test('without credentials: exactly the ready lines’ export lines, NO_PROXY with the API servers and the caller’s own entries', () => {
  const { info } = snapshotInfo({});
  const ready = readyLines({
    socks: socks.address,
    http: http.address,
    context: 'prod',
    namespace: 'shop',
    apiServers: routes.map((r) => r.details!.server as string),
  });
  assert.deepEqual(
    info.env,
    ready.filter((l) => l.startsWith('export ')),
  );
  assert.ok(info.env?.includes("export NO_PROXY='localhost,127.0.0.1,::1,[::1],api.prod.example,10.1.2.3,.corp.example'"), info.env?.join('\n'));
  assert.ok(info.env?.includes("export no_proxy='localhost,127.0.0.1,::1,[::1],api.prod.example,10.1.2.3,.corp.example'"));
  assert.ok(info.env?.includes('export ALL_PROXY=socks5h://127.0.0.1:1080'));
});

test('with credentials: the user name and a placeholder in every proxy URL; the password appears nowhere in the feed', () => {
  const secret = 'pa:ss/w0rd-s3cret';
  const message = snapshotInfo({ auth: new ProxyAuth({ username: 'alice', password: secret }) });
  assert.equal(message.info.auth, true);
  for (const line of message.info.env!.filter((l) => /_PROXY=|_proxy=/i.test(l) && !/NO_PROXY/i.test(l))) {
    assert.match(line, new RegExp(`=(socks5h|http)://alice:${PASSWORD}@127\\.0\\.0\\.1:(1080|3128)$`), line);
  }
  const text = JSON.stringify(message);
  assert.ok(!text.includes(secret) && !text.includes(encodeURIComponent(secret)), 'the password is not in the feed');
});
