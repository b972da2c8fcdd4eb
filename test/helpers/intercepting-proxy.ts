// A corporate egress proxy that intercepts TLS, as the API connection must work through one: it
// answers HTTP CONNECT, then plays the server with a certificate for the CONNECT host issued by
// its own CA, and forwards the decrypted bytes over its own TLS connection to the one loopback
// upstream it serves (the simulated API server, verified with that server's CA). Clients trust it
// only with its CA.
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import { SimPki } from '../sim/pki.js';

export interface InterceptingProxy {
  url: string;
  /** The proxy's own CA (what --extra-ca is given). */
  caPem: string;
  /** CONNECT targets asked for, in order. */
  connects: string[];
  /** TLS handshakes clients completed with the proxy's certificate. */
  intercepted: number;
  close(): Promise<void>;
}

export async function startInterceptingProxy(upstream: { port: number; caPem: string }): Promise<InterceptingProxy> {
  const pki = new SimPki();
  const certs = new Map<string, { keyPem: string; certPem: string }>();
  const sockets = new Set<net.Socket>();
  const proxy: InterceptingProxy = { url: '', caPem: pki.caPem, connects: [], intercepted: 0, close: async () => undefined };
  const server = http.createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    const target = req.url ?? '';
    proxy.connects.push(target);
    const host = target.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
    let cert = certs.get(host);
    if (!cert) certs.set(host, (cert = pki.servingCert(host)));
    client.write('HTTP/1.1 200 Connection established\r\n\r\n');
    if (head.length) client.unshift(head);
    const inner = new tls.TLSSocket(client, { isServer: true, key: cert.keyPem, cert: cert.certPem });
    inner.on('error', () => client.destroy());
    inner.once('secure', () => {
      proxy.intercepted++;
      const up = tls.connect({ host: '127.0.0.1', port: upstream.port, ca: upstream.caPem, servername: 'localhost' }, () => {
        inner.pipe(up).pipe(inner);
      });
      up.on('error', () => inner.destroy());
      inner.on('close', () => up.destroy());
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  proxy.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return proxy;
}
