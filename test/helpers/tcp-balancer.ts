// A TCP load balancer on loopback in front of several API servers, as a highly available control
// plane has one (a cloud's network load balancer, kubeadm's controlPlaneEndpoint): each new
// connection goes to the next backend in turn, and one that refuses it (a server restarting) is
// passed over, as a balancer's health checks would. A connection whose backend goes away is closed
// on the client's side too; nothing is read or changed on the way.
import net from 'node:net';

export interface TcpBalancer {
  host: string;
  port: number;
  close(): Promise<void>;
}

/** `host`: the loopback address it listens on (127.0.0.1, or ::1 for a bed serving on [::1]). */
export async function startTcpBalancer(backends: Array<{ host: string; port: number }>, host = '127.0.0.1'): Promise<TcpBalancer> {
  let next = 0;
  const open = new Set<net.Socket>();
  const track = (s: net.Socket): void => {
    open.add(s);
    s.once('close', () => open.delete(s));
  };
  /** Dials the backends from the next in turn; undefined when every one refused. */
  const dial = async (): Promise<net.Socket | undefined> => {
    for (let tried = 0; tried < backends.length; tried++) {
      const b = backends[next++ % backends.length]!;
      const socket = await new Promise<net.Socket | undefined>((resolve) => {
        const s = net.connect(b.port, b.host);
        s.once('connect', () => resolve(s));
        s.once('error', () => resolve(undefined));
      });
      if (socket) return socket;
    }
    return undefined;
  };
  const server = net.createServer((client) => {
    track(client);
    client.pause();
    client.on('error', () => client.destroy());
    void dial().then((upstream) => {
      if (!upstream || client.destroyed) {
        upstream?.destroy();
        client.destroy();
        return;
      }
      track(upstream);
      upstream.on('error', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
      client.once('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    host,
    port,
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
