// A TCP relay in front of a loopback server (a kubeconfig `server:` names it) that decides what
// becomes of each new connection: 'pass' relays it, 'reset' closes it at once (a server that is
// down), 'hold' accepts it and keeps it waiting until the gate passes again (a server slow to
// answer). 'blackhole' is a dead path: new connections are held and the ones being relayed stop
// carrying bytes either way, nothing reset or closed; 'pass' lets them flow again. It counts the
// connections it accepted. Loopback only.
import net from 'node:net';
import { once } from 'node:events';

export type GateMode = 'pass' | 'hold' | 'reset' | 'blackhole';

export interface TcpGate {
  /** https://127.0.0.1:PORT, to put in a kubeconfig. */
  url: string;
  /** Connections accepted so far, whatever became of them. */
  readonly connections: number;
  /** New connections get this; held ones are relayed on 'pass' and closed on 'reset'. */
  set(mode: GateMode): void;
  /**
   * The connections being relayed are forgotten, as by a NAT that dropped its state: they stay
   * open and silent for good ('pass' does not revive them); new ones work as the mode says.
   */
  forget(): void;
  close(): Promise<void>;
}

/** `listen`: where the relay listens (default 127.0.0.1, a free port); loopback addresses only. */
export async function startTcpGate(
  target: { host: string; port: number },
  initial: GateMode = 'pass',
  listen: { host?: string; port?: number } = {},
): Promise<TcpGate> {
  let mode = initial;
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const held: net.Socket[] = [];
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const pairs = new Set<[net.Socket, net.Socket]>();
  const relay = (client: net.Socket) => {
    if (client.destroyed) return;
    const upstream = net.connect(target.port, target.host);
    track(upstream);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream).pipe(client);
    client.on('close', () => {
      pairs.delete(pair);
      upstream.destroy();
    });
    upstream.on('close', () => client.destroy());
    client.resume();
  };
  /** The relayed pairs stop (or start again) carrying bytes; their sockets stay open. */
  const flow = (on: boolean) => {
    for (const [client, upstream] of pairs) {
      if (on) {
        client.pipe(upstream).pipe(client);
        client.resume();
        upstream.resume();
      } else {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    }
  };
  const server = net.createServer((client) => {
    connections++;
    track(client);
    if (mode === 'reset') return void client.destroy();
    if (mode === 'hold' || mode === 'blackhole') {
      client.pause();
      return void held.push(client);
    }
    relay(client);
  });
  server.listen(listen.port ?? 0, listen.host ?? '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `https://${listen.host ?? '127.0.0.1'}:${(server.address() as net.AddressInfo).port}`,
    get connections() {
      return connections;
    },
    set(next) {
      const was = mode;
      mode = next;
      if (next === 'blackhole') return flow(false);
      if (was === 'blackhole') flow(true);
      if (next === 'hold') return;
      for (const c of held.splice(0)) {
        if (next === 'pass') relay(c);
        else c.destroy();
      }
    },
    forget() {
      flow(false);
      pairs.clear();
    },
    async close() {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
