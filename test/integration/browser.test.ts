// A real browser (headless Chromium) pointed at the proxy reaches a Service by its cluster name.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { CHROMIUM_FLAGS } from '../helpers/chromium.js';

function findChromium(): string | undefined {
  // CI installs Chrome where it likes and says where (browser-actions/setup-chrome).
  if (process.env.CHROME_PATH) return process.env.CHROME_PATH;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
    } catch {
      /* try the next */
    }
  }
  return undefined;
}

const chromium = findChromium();
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  if (!chromium) return;
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
});
after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

async function dumpDom(proxyServer: string, url: string): Promise<string> {
  const profile = await mkdtemp(path.join(os.tmpdir(), 'proxyout-chromium-'));
  try {
    return await new Promise((resolve, reject) => {
      execFile(
        chromium!,
        [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`, `--proxy-server=${proxyServer}`, '--dump-dom', url],
        { encoding: 'utf8', timeout: 60_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
      );
    });
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

test('Chromium through the SOCKS5 listener resolves the cluster name remotely', async (t) => {
  if (!chromium) return t.skip('chromium not installed: browser check skipped');
  const dom = await dumpDom(`socks5://${proxy.socks}`, 'http://web.shop.svc.cluster.local:8080/');
  assert.match(dom, /hello from web-\S+ \(shop\) port 8081/);
});

test('Chromium through the HTTP listener (absolute-form requests)', async (t) => {
  if (!chromium) return t.skip('chromium not installed: browser check skipped');
  const dom = await dumpDom(`http://${proxy.http}`, 'http://api.shop/whoami');
  assert.match(dom, /"path":"\/whoami"/);
});
