// An HTTP proxy that refuses the API server's CONNECT (407 for credentials, 403 by policy): every
// API connection says what the proxy wants, as kubectl ("Proxy Authentication Required") does,
// not client-node's agent's bare "Bad response: 407"; the password never reaches the message.
// An https:// proxy whose certificate the corporate CA signed works with that CA as --extra-ca.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import net from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';
import { loadExtraCA, type ExtraCA } from '../../src/cluster/egress-proxy.js';
import { ProxyRefusedError } from '../../src/cluster/proxy-failures.js';
import { apiGet } from '../../src/cluster/list-watch.js';
import { SimPki } from '../sim/pki.js';

const GOOD = `Basic ${Buffer.from('alice:right').toString('base64')}`;
let proxy: http.Server;
let proxyUrl = '';
const seen: Array<string | undefined> = [];

before(async () => {
  proxy = http.createServer((_req, res) => res.writeHead(405).end());
  proxy.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    seen.push(req.headers['proxy-authorization']);
    if (req.url?.startsWith('forbidden.example:')) socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
    else if (req.headers['proxy-authorization'] !== GOOD)
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="corp"\r\nContent-Length: 0\r\n\r\n');
    else socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  proxyUrl = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
});
after(() => proxy.close());

function api(opts: { proxyUrl?: string; env?: NodeJS.ProcessEnv; host?: string; port?: number; caData?: string; extraCA?: ExtraCA }): ApiConnection {
  const kc = new KubeConfig();
  const server = `https://${opts.host ?? 'api.corp.example'}:${opts.port ?? 6443}`;
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, ...(opts.proxyUrl ? { proxyUrl: opts.proxyUrl } : {}), ...(opts.caData ? { caData: opts.caData } : {}) }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return new ApiConnection(kc, { env: opts.env ?? {}, extraCA: opts.extraCA });
}

const refusal = (pattern: RegExp, fix: RegExp) => (err: unknown) => {
  assert.ok(err instanceof ProxyRefusedError, String(err));
  assert.match(err.message, pattern);
  assert.match(err.fix, fix);
  assert.doesNotMatch(`${err.message} ${err.fix}`, /wrong|right|Bad response/);
  return true;
};

test("no credentials for a proxy that wants them: the proxy-url's proxy is named and the fix says where they go", async () => {
  const conn = api({ proxyUrl: `http://${proxyUrl}` });
  const pattern = new RegExp(
    `^the proxy http://${proxyUrl} \\(from the kubeconfig's proxy-url\\) wants a user name and password \\(407 Proxy Authentication Required\\)`,
  );
  await assert.rejects(conn.getJson('/version'), refusal(pattern, /give them in proxy-url: http:\/\/USER:PASSWORD@HOST:PORT/));
  // Watches, probes and lists go through apiGet: the same words there.
  await assert.rejects(apiGet(conn, '/readyz', AbortSignal.timeout(5000), 5000), refusal(pattern, /proxy-url/));
});

test('credentials the proxy refuses: said so, from HTTPS_PROXY, with no password in the message', async () => {
  const conn = api({ env: { HTTPS_PROXY: `http://alice:wrong@${proxyUrl}` } });
  await assert.rejects(
    conn.getJson('/version'),
    refusal(
      new RegExp(
        `^the proxy http://${proxyUrl} \\(from HTTPS_PROXY\\) refused the user name and password given in it \\(407 Proxy Authentication Required\\)$`,
      ),
      /correct the user name and password in HTTPS_PROXY/,
    ),
  );
  assert.equal(seen.at(-1), `Basic ${Buffer.from('alice:wrong').toString('base64')}`, 'they were sent');
});

test('a proxy that forbids the destination: its status, not an authentication hint', async () => {
  const conn = api({ env: { HTTPS_PROXY: `http://alice:right@${proxyUrl}` }, host: 'forbidden.example' });
  await assert.rejects(conn.getJson('/version'), refusal(/refused to connect to the API server \(403 Forbidden\)$/, /ask its administrators/));
});

test("an https:// proxy signed by the corporate CA: --extra-ca trusts it; without it, the proxy's certificate is named", async () => {
  const clusterPki = new SimPki();
  const corp = new SimPki();
  const apiCert = clusterPki.servingCert();
  const apiServer = https.createServer({ key: apiCert.keyPem, cert: apiCert.certPem }, (_req, res) => res.end('{"gitVersion":"v1.37.2"}'));
  apiServer.listen(0, '127.0.0.1');
  await once(apiServer, 'listening');
  const proxyCert = corp.servingCert();
  const tlsProxy = https.createServer({ key: proxyCert.keyPem, cert: proxyCert.certPem }, (_req, res) => res.writeHead(405).end());
  tlsProxy.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    const [host, port] = (req.url ?? '').split(':');
    const upstream = net.connect(Number(port), host, () => {
      socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
      socket.pipe(upstream).pipe(socket);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  tlsProxy.on('tlsClientError', () => undefined);
  tlsProxy.listen(0, '127.0.0.1');
  await once(tlsProxy, 'listening');
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-corp-ca-'));
  try {
    const corpFile = path.join(dir, 'corp.pem');
    writeFileSync(corpFile, corp.caPem);
    const otherFile = path.join(dir, 'other.pem');
    writeFileSync(otherFile, new SimPki().caPem);
    const conn = (extraCA?: ExtraCA) =>
      api({
        host: '127.0.0.1',
        port: (apiServer.address() as net.AddressInfo).port,
        proxyUrl: `https://127.0.0.1:${(tlsProxy.address() as net.AddressInfo).port}`,
        caData: Buffer.from(clusterPki.caPem).toString('base64'),
        extraCA,
      });
    assert.deepEqual(await conn(loadExtraCA(corpFile)).getJson('/version'), { gitVersion: 'v1.37.2' });
    await assert.rejects(
      conn().getJson('/version'),
      refusal(/\(from the kubeconfig's proxy-url\): its own certificate is not trusted \(.+\): trust its CA with --extra-ca FILE$/, /--extra-ca FILE/),
    );
    await assert.rejects(
      conn(loadExtraCA(otherFile)).getJson('/version'),
      refusal(/even with the extra CA .*other\.pem$/, /did not sign the proxy's certificate/),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
    apiServer.close();
    tlsProxy.close();
  }
});
