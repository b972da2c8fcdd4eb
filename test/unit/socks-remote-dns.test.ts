// A socks5:// proxy (the kubeconfig's proxy-url, or HTTPS_PROXY) is sent the API server's name, as
// Go's SOCKS5 dialer sends it (kubectl): the name may resolve only behind the proxy. client-node's
// socks-proxy-agent would look it up here first (only socks5h:// leaves it to the proxy).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';

/** A SOCKS5 server that records each CONNECT's address type and address, then refuses it. */
async function recordingSocks(t: { after(fn: () => void): void }) {
  const seen: string[] = [];
  const server = net.createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', () => {
      s.write(Buffer.from([5, 0]));
      s.once('data', (req: Buffer) => {
        const atyp = req[3];
        seen.push(atyp === 3 ? `name ${req.subarray(5, 5 + req[4]!).toString()}` : `address type ${atyp}`);
        s.end(Buffer.from([5, 4, 0, 1, 0, 0, 0, 0, 0, 0]));
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  return { seen, url: `socks5://127.0.0.1:${(server.address() as net.AddressInfo).port}` };
}

function kubeconfig(t: { after(fn: () => void): void }, proxyUrl?: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-socks-dns-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  const proxy = proxyUrl ? `, proxy-url: "${proxyUrl}"` : '';
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      // .invalid never resolves (RFC 6761): only the proxy could know the name.
      `clusters: [{name: c, cluster: {server: "https://api.internal.invalid:6443", insecure-skip-tls-verify: true${proxy}}}]`,
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n'),
  );
  return file;
}

test("proxy-url socks5:// is sent the server's name, not a local lookup of it", async (t) => {
  const socks = await recordingSocks(t);
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(t, socks.url) });
  await assert.rejects(new ApiConnection(kc, { env: {} }).getJson('/version', 5_000));
  assert.deepEqual(socks.seen, ['name api.internal.invalid']);
});

test("HTTPS_PROXY=socks5:// is sent the server's name too", async (t) => {
  const socks = await recordingSocks(t);
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(t) });
  await assert.rejects(new ApiConnection(kc, { env: { HTTPS_PROXY: socks.url } }).getJson('/version', 5_000));
  assert.deepEqual(socks.seen, ['name api.internal.invalid']);
});
