// A proxy at an IPv6 literal (`proxy-url: http://[::1]:3128`, `socks5://[::1]:1080`, or the same in
// HTTPS_PROXY): kubectl dials it; the agents client-node makes dialled "[::1]", brackets and all
// (getaddrinfo ENOTFOUND). HTTP CONNECT and SOCKS5, with and without an extra CA (another agent).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';
import { loadExtraCA } from '../../src/cluster/egress-proxy.js';
import { errorMessage } from '../../src/core/errors.js';
import { SimPki } from '../sim/pki.js';

const pki = new SimPki();
let api: https.Server;
let connectProxy: http.Server;
let socksProxy: net.Server;
let dir: string;
const carried: string[] = [];

function relay(client: net.Socket, port: number, onOpen: () => void, head?: Buffer): void {
  const upstream = net.connect(port, '127.0.0.1', () => {
    onOpen();
    if (head?.length) upstream.write(head);
    client.pipe(upstream).pipe(client);
  });
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
}

const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;

before(async () => {
  const cert = pki.servingCert();
  api = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (_req, res) => res.end('{"gitVersion":"v1.37.2"}'));
  api.listen(0, '127.0.0.1');
  await once(api, 'listening');
  connectProxy = http.createServer((_req, res) => res.writeHead(405).end());
  connectProxy.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    carried.push(`connect ${req.url}`);
    relay(socket, portOf(api), () => socket.write('HTTP/1.1 200 Connection established\r\n\r\n'), head);
  });
  connectProxy.listen(0, '::1');
  await once(connectProxy, 'listening');
  // SOCKS5, no authentication, CONNECT to the API server whatever is asked (RFC 1928).
  socksProxy = net.createServer((client) => {
    client.once('data', () => {
      client.write(Buffer.from([5, 0]));
      client.once('data', (req: Buffer) => {
        carried.push(`socks ${req[3] === 3 ? req.subarray(5, 5 + req[4]!).toString() : 'ip'}`);
        relay(client, portOf(api), () => client.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0])));
      });
    });
  });
  socksProxy.listen(0, '::1');
  await once(socksProxy, 'listening');
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-ipv6-proxy-'));
});
after(() => {
  api.close();
  connectProxy.close();
  socksProxy.close();
  rmSync(dir, { recursive: true, force: true });
});

function connection(proxyUrl: string, extraCA: boolean): ApiConnection {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://localhost:${portOf(api)}`, proxyUrl, caData: Buffer.from(pki.caPem).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  const file = path.join(dir, 'extra.pem');
  writeFileSync(file, new SimPki().caPem);
  return new ApiConnection(kc, { env: {}, ...(extraCA ? { extraCA: loadExtraCA(file) } : {}) });
}

for (const extraCA of [false, true]) {
  test(`http://[::1]:PORT and socks5://[::1]:PORT as proxy-url carry the API requests${extraCA ? ' (with an extra CA)' : ''}`, async () => {
    for (const [url, expect] of [
      [`http://[::1]:${portOf(connectProxy)}`, `connect localhost:${portOf(api)}`],
      [`socks5://[::1]:${portOf(socksProxy)}`, 'socks localhost'],
    ] as const) {
      carried.length = 0;
      assert.deepEqual(await connection(url, extraCA).getJson('/version'), { gitVersion: 'v1.37.2' }, url);
      assert.deepEqual(carried, [expect], url);
    }
  });
}

// An API server at an IPv6 literal with an extra CA (the agent made again): it was given SNI
// "[::1]", which Node then verified as a name against the certificate ("Host: [::1]. is not in
// the cert's altnames"), where kubectl checks the IP SAN.
test('https://[::1]:PORT as the server with an extra CA or via a route verifies the IP SAN', async () => {
  const cert = pki.servingCert();
  const v6 = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (_req, res) => res.end('{"gitVersion":"v1.37.2"}'));
  v6.listen(0, '::1');
  await once(v6, 'listening');
  try {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://[::1]:${portOf(v6)}`, caData: Buffer.from(pki.caPem).toString('base64') }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    const file = path.join(dir, 'extra-v6.pem');
    writeFileSync(file, new SimPki().caPem);
    for (const extraCA of [undefined, loadExtraCA(file)]) {
      assert.deepEqual(await new ApiConnection(kc, { env: {}, ...(extraCA && { extraCA }) }).getJson('/version'), { gitVersion: 'v1.37.2' });
    }
    // `via: ROUTE` (the API connection dialled through another route) makes the agent again too.
    const dialled: string[] = [];
    const dial = async (host: string, port: number) => {
      dialled.push(host);
      const socket = net.connect(port, host);
      await once(socket, 'connect');
      return socket;
    };
    assert.deepEqual(await new ApiConnection(kc, { env: {}, via: { route: 'jump', dial } }).getJson('/version'), { gitVersion: 'v1.37.2' });
    assert.deepEqual(dialled, ['::1']);
  } finally {
    v6.close();
  }
});

// A refused proxy at an IPv6 address: the message names it as kubectl does, [::1]:PORT.
test('a proxy-url at a closed [::1] port is named [::1]:PORT in the error', async () => {
  const closed = net.createServer().listen(0, '::1');
  await once(closed, 'listening');
  const port = portOf(closed);
  closed.close();
  await once(closed, 'close');
  // (socks5: the SOCKS library's error keeps Node's words but not the address, so it stays unbracketed.)
  for (const scheme of ['http']) {
    const err = await connection(`${scheme}://[::1]:${port}`, false)
      .getJson('/version')
      .then(
        () => assert.fail('no proxy there'),
        (e: unknown) => e,
      );
    assert.match(errorMessage(err), new RegExp(`^connect ECONNREFUSED \\[::1\\]:${port} \\(through proxy ${scheme}://\\[::1\\]:${port}`), scheme);
  }
});
