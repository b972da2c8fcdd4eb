// Failure lines past the burst of their 10 s window are summed up in one "N more like this" line
// when the window ends: a proxy stopped within the window must write that line before it exits,
// or its log under-counts what it refused. The real proxy process, the simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { REPEAT_LIMIT_DEFAULTS } from '../../src/core/log-limit.js';

const REQUESTS = 25;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
});

after(async () => {
  await proxy?.stop();
  await cluster?.close();
});

test('a proxy stopped within the window logs how many failure lines it held back', async () => {
  for (let i = 0; i < REQUESTS; i++) {
    const { reply, socket } = await socks5Connect(proxy.socks!, 'nope.shop', 80);
    socket.destroy();
    assert.notEqual(reply, 0);
  }
  const code = await proxy.stop();
  assert.equal(code, 0);
  const lines = proxy.logs.filter((l) => l.reason === 'unknown-target');
  const summaries = lines.filter((l) => l.suppressed !== undefined);
  assert.equal(lines.length - summaries.length, REPEAT_LIMIT_DEFAULTS.burst);
  assert.deepEqual(
    summaries.map((l) => l.suppressed),
    [REQUESTS - REPEAT_LIMIT_DEFAULTS.burst],
  );
  // Within the window's first seconds, not "in 10 s".
  assert.match(String(summaries[0]!.msg), /^5 more like this in [0-9](\.\d)? s, the last: stream failed: /);
});
