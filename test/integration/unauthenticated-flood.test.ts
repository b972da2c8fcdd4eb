// A flood of credential-less requests against the real proxy process with authentication on:
// every one gets its 407 and its connection closed, and the log gets at most a burst of failure
// lines per reason and source, then one "N more like this" summary — not a line per request.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { splitHostPort } from '../helpers/socks-client.js';
import { REPEAT_LIMIT_DEFAULTS, TEST_WINDOW_ENV } from '../../src/core/log-limit.js';

const REQUESTS = 300;
const WINDOW_MS = 5_000;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'], {
    // The repeat window 5 s, not 10 (log-limit.ts TEST_WINDOW_ENV, a test hook): the summary line
    // is what is tested, not its 10 s; the flood (~1 s) still falls well within one window.
    env: { KUBECTL_PROXYOUT_PROXY_AUTH: 'alice:s3cret-pw', [TEST_WINDOW_ENV]: String(WINDOW_MS) },
  });
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

/** One request without credentials on a fresh connection; the answer and whether the proxy closed it. */
async function unauthenticated(i: number): Promise<{ answer: string; closedByProxy: boolean }> {
  const [host, port] = splitHostPort(proxy.http!);
  const s = net.connect({ host, port, localAddress: `127.0.${i % 200}.${1 + (i % 250)}` });
  s.on('error', () => undefined);
  await once(s, 'connect');
  s.write('GET http://web.shop:8080/ HTTP/1.1\r\nHost: web.shop:8080\r\n\r\n');
  let answer = '';
  s.setEncoding('latin1');
  s.on('data', (c: string) => (answer += c));
  const closedByProxy = await new Promise<boolean>((resolve) => {
    s.once('end', () => resolve(true));
    setTimeout(() => resolve(false), 5000).unref();
  });
  s.destroy();
  return { answer, closedByProxy };
}

test(`${REQUESTS} credential-less requests from all over 127.0.0.0/8: each 407 and closed; the log stays short`, async () => {
  for (let start = 0; start < REQUESTS; start += 30) {
    const batch = await Promise.all(Array.from({ length: 30 }, (_, i) => unauthenticated(start + i)));
    for (const r of batch) {
      assert.match(r.answer, /^HTTP\/1\.1 407 [^]*\r\nConnection: close\r\n/i);
      assert.ok(r.closedByProxy, 'the proxy closed the connection after its 407');
    }
  }
  const failures = () => proxy.logs.filter((l) => l.reason === 'auth-failed');
  const { burst } = REPEAT_LIMIT_DEFAULTS;
  // The summary comes when the window ends: wait for it rather than race it.
  for (let waited = 0; waited < WINDOW_MS + 5000 && !failures().some((l) => l.suppressed !== undefined); waited += 200) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const lines = failures();
  const summaries = lines.filter((l) => l.suppressed !== undefined);
  assert.equal(lines.length - summaries.length, burst, `${burst} failure lines in full, not ${REQUESTS}`);
  assert.equal(summaries.length, 1);
  assert.equal(summaries[0]!.suppressed, REQUESTS - burst);
  assert.match(String(summaries[0]!.msg), new RegExp(`^${REQUESTS - burst} more like this in \\d+ s, the last: stream failed: proxy authentication required`));
});
