// A TCP relay between the plugin and the simulated API server (a kubeconfig `server:` names it)
// that can go silent: freeze() makes every connection open at that moment a black hole — bytes
// are read and dropped both ways, nothing is closed or reset — which is what a NAT or load
// balancer that forgot a flow, or a peer host that vanished, looks like from our side. TCP
// itself reports nothing then; only the plugin's keepalive can notice. Loopback only.
import net from 'node:net';
import { once } from 'node:events';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  frozen: boolean;
}

export interface FreezableProxy {
  /** https://127.0.0.1:PORT, to put in a kubeconfig. */
  url: string;
  /** Connections from the plugin that are still open. */
  readonly open: number;
  /** Frozen connections that the plugin has closed since (it noticed the silence). */
  readonly frozenClosedByClient: number;
  /** Black-holes every connection open now; later connections pass normally. Returns how many. */
  freeze(): number;
  close(): Promise<void>;
}

export async function startFreezableProxy(targetPort: number): Promise<FreezableProxy> {
  const pairs = new Set<Pair>();
  let frozenClosedByClient = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair: Pair = { client, upstream, frozen: false };
    pairs.add(pair);
    const forward = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (pair.frozen) return;
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
      });
    };
    forward(client, upstream);
    forward(upstream, client);
    client.on('close', () => {
      if (pair.frozen) frozenClosedByClient++;
      pairs.delete(pair);
      upstream.destroy();
    });
    upstream.on('close', () => {
      if (!pair.frozen) client.destroy();
    });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get open() {
      return pairs.size;
    },
    get frozenClosedByClient() {
      return frozenClosedByClient;
    },
    freeze() {
      for (const p of pairs) {
        p.frozen = true;
        // Keep reading both sides (and dropping it) so neither end sees backpressure or a close.
        p.client.resume();
        p.upstream.resume();
      }
      return pairs.size;
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}
