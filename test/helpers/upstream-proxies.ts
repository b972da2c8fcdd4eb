// Tiny proxies standing between the plugin and the API server, as a kubeconfig `proxy-url` would
// name: a SOCKS5 relay (RFC 1928, no auth, CONNECT only) and an HTTP CONNECT proxy. Both only
// ever connect to the one loopback port they are told, and count what they carried.
import net from 'node:net';
import http from 'node:http';
import { once } from 'node:events';

export interface UpstreamProxy {
  url: string;
  connections: number;
  close(): Promise<void>;
}

function pipeTo(port: number, client: net.Socket, head: Buffer, onOpen: () => void): void {
  const upstream = net.connect(port, '127.0.0.1', () => {
    onOpen();
    if (head.length) upstream.write(head);
    client.pipe(upstream).pipe(client);
  });
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
}

export async function startSocks5Relay(allowPort: number): Promise<UpstreamProxy> {
  const sockets = new Set<net.Socket>();
  const proxy: UpstreamProxy = { url: '', connections: 0, close: async () => undefined };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    let buf = Buffer.alloc(0);
    let stage = 0;
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (stage === 0 && buf.length >= 2 && buf.length >= 2 + buf[1]) {
        buf = buf.subarray(2 + buf[1]);
        client.write(Buffer.from([5, 0]));
        stage = 1;
      }
      if (stage !== 1 || buf.length < 5) return;
      const atyp = buf[3];
      const addrLen = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + buf[4];
      if (buf.length < 4 + addrLen + 2) return;
      const port = buf.readUInt16BE(4 + addrLen);
      const rest = buf.subarray(4 + addrLen + 2);
      client.off('data', onData);
      stage = 2;
      if (port !== allowPort) {
        client.end(Buffer.from([5, 2, 0, 1, 0, 0, 0, 0, 0, 0]));
        return;
      }
      pipeTo(port, client, rest, () => {
        proxy.connections++;
        client.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]));
      });
    };
    client.on('data', onData);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy.url = `socks5://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  proxy.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  };
  return proxy;
}

export async function startConnectProxy(allowPort: number): Promise<UpstreamProxy> {
  const sockets = new Set<net.Socket>();
  const proxy: UpstreamProxy = { url: '', connections: 0, close: async () => undefined };
  const server = http.createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    const port = Number(/:(\d+)$/.exec(req.url ?? '')?.[1]);
    if (port !== allowPort) {
      client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    pipeTo(port, client, head, () => {
      proxy.connections++;
      client.write('HTTP/1.1 200 Connection established\r\n\r\n');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  proxy.close = async () => {
    for (const s of sockets) s.destroy();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return proxy;
}
