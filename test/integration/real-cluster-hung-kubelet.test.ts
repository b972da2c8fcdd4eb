// One of a Service's pods sits behind a kubelet that does not answer (it hangs, or its node is cut
// off and not yet marked NotReady: the endpoint stays ready for 40 s and more). The node stand-in
// takes the port-forward request for that pod and never answers (proxyout.test/kubelet-hang). The
// other endpoints serve: a connection must not wait the whole connect timeout on that one and then
// fail, but move on within seconds, and the next connections go to the others first. Skips with a
// reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

const skip = skipUnlessRealCluster();
const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let hung = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await applyAndRollOut(cluster, manifests(webDeployment(4), webService()), ['deployment/web']);
  hung = (await cluster.kubectl(['-n', 'shop', 'get', 'pods', '-l', 'app=web', '-o', 'jsonpath={.items[0].metadata.name}'])).stdout.trim();
  await cluster.kubectl(['-n', 'shop', 'annotate', 'pod', hung, 'proxyout.test/kubelet-hang=true']);
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

for (const transport of TRANSPORTS) {
  test(
    `${transport}: a Service with one endpoint behind a hung kubelet: every connection is served, within seconds`,
    { timeout: 90_000 },
    async (t: TestContext) => {
      if (skip) return t.skip(skip);
      const p = proxies.get(transport)!;
      const results: Array<{ code: number; answer: string; ms: number }> = [];
      // Eight connections in turn: the rotation puts the hung pod first at least once.
      for (let i = 0; i < 8; i++) {
        const t0 = Date.now();
        const r = await curl(['--socks5-hostname', p.socks!, 'http://web.shop/'], 30_000);
        results.push({ code: r.code, answer: r.stdout.trim() || r.stderr.trim(), ms: Date.now() - t0 });
      }
      t.diagnostic(JSON.stringify(results));
      for (const r of results) assert.equal(r.code, 0, `served by another endpoint: ${r.answer}`);
      for (const r of results) assert.ok(!r.answer.includes(hung), 'never by the pod behind the hung kubelet');
      const slow = results.filter((r) => r.ms > 1000);
      assert.ok(
        slow.every((r) => r.ms < 5000),
        `no connection waits more than a few seconds (the connect timeout is 15 s): ${slow.map((r) => r.ms).join(', ')} ms`,
      );
      assert.ok(slow.length <= 1, `once it did not open in time, the hung pod's endpoint goes last: ${slow.length} slow connections`);
    },
  );
}
