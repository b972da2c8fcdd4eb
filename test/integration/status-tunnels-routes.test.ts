// `status` lists the port-forward tunnels of every cluster route, each named by its route when
// there are several (two clusters may both have a data/echo-…): it listed the default route's only.
// Real CLI (connect, status, disconnect), two simulated clusters, raw SOCKS5 streams.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';
import { statusItem } from '../helpers/status-json.js';
import { SAMPLE } from '../sim/sample.js';

let multi: MultiCluster;
before(async () => {
  multi = await startClusters(['prod', 'staging']);
});
after(async () => {
  await multi?.close();
});

test('status shows the tunnels of each cluster route, named by route', async () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-routes-state-'));
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  try {
    const r = await runCli(
      ['connect', '--kubeconfig', multi.kubeconfig, '--context', 'prod', '--context', 'staging', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'],
      { env },
    );
    assert.equal(r.code, 0, r.stderr);
    const { id, socks } = JSON.parse(r.stdout) as { id: string; socks: string };
    const held = [];
    for (const host of ['echo.data', 'echo.data.staging']) {
      const { reply, socket } = await socks5Connect(socks, host, 7000);
      assert.equal(reply, 0, host);
      const reader = new Reader(socket);
      socket.write('x');
      assert.equal((await reader.read(1)).toString(), 'x');
      held.push(socket);
    }
    const s = await runCli(['status', id, '--json'], { env });
    const item = statusItem<{ transports?: Array<{ route?: string; pod: string; tunnels: number; streams: number }> }>(s.stdout);
    const pod = `data/${SAMPLE.echo.pods[0]}`;
    assert.deepEqual(
      item.transports?.map((t) => `${t.route} ${t.pod} ${t.tunnels}/${t.streams}`),
      [`prod ${pod} 1/1`, `staging ${pod} 1/1`],
    );
    const table = await runCli(['status', id], { env });
    assert.match(table.stdout, new RegExp(`${id}: route staging: ${pod} via spdy: 1 tunnel, 1 stream`));
    for (const socket of held) socket.end();
    assert.equal((await runCli(['disconnect', id], { env })).code, 0);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
});
