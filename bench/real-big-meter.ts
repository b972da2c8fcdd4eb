// What `npm run bench:real-big` counts the proxy's API load with, against a real API server:
// bytes through a TCP relay in front of it (TLS passes through: the bytes on the wire, records
// and handshakes included) and requests from the API server's audit log, where only the user the
// proxy runs as is audited.
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import net from 'node:net';

export class CountingRelay {
  toClient = 0;
  toServer = 0;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly url: string,
  ) {}

  /** A relay to target (https://127.0.0.1:PORT) on a free loopback port. */
  static async start(target: URL): Promise<CountingRelay> {
    const server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const relay = new CountingRelay(server, `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    server.on('connection', (client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        relay.sockets.add(s);
        s.on('error', () => s.destroy());
        s.on('close', () => relay.sockets.delete(s));
      }
      client.on('data', (d: Buffer) => (relay.toServer += d.length));
      upstream.on('data', (d: Buffer) => (relay.toClient += d.length));
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    return relay;
  }

  reset(): void {
    this.toClient = this.toServer = 0;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.server.close();
    await once(this.server, 'close');
  }
}

interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  requestReceivedTimestamp: string;
  responseStatus?: { code?: number };
}

/** The audited requests of one window: how many, of which kind. */
export class AuditWindow {
  constructor(readonly events: AuditEvent[]) {}

  get count(): number {
    return this.events.length;
  }

  /** "7 (2 list of which 0 continued, 3 watch of which 3 watch-list, 2 other)", answers ≥ 400 named. */
  summary(): string {
    const by = (p: (e: AuditEvent) => boolean) => this.events.filter(p).length;
    const lists = by((e) => e.verb === 'list');
    const continued = by((e) => e.verb === 'list' && /[?&]continue=/.test(e.requestURI));
    const watches = by((e) => e.verb === 'watch');
    const watchLists = by((e) => e.verb === 'watch' && /[?&]sendInitialEvents=true/.test(e.requestURI));
    const other = this.count - lists - watches;
    const failed = this.events
      .filter((e) => (e.responseStatus?.code ?? 200) >= 400)
      .map((e) => `${e.verb} ${e.requestURI.split('?')[0]} ${e.responseStatus?.code}`);
    return `${this.count} (${lists} list of which ${continued} continued, ${watches} watch of which ${watchLists} watch-list, ${other} other${failed.length ? `; answered ≥ 400: ${failed.join(', ')}` : ''})`;
  }
}

export class AuditLog {
  constructor(private readonly file: string) {}

  /** The requests the API server received in [since, until] (ms since the epoch), one per audit ID. */
  async between(since: number, until: number): Promise<AuditWindow> {
    const text = await readFile(this.file, 'utf8').catch(() => '');
    const seen = new Map<string, AuditEvent>();
    for (const line of text.split('\n')) {
      if (!line) continue;
      const e = JSON.parse(line) as AuditEvent;
      const at = Date.parse(e.requestReceivedTimestamp);
      // A watch logs ResponseStarted, then ResponseComplete when it ends: one request.
      if (at >= since && at <= until) seen.set(e.auditID, { ...seen.get(e.auditID), ...e });
    }
    return new AuditWindow([...seen.values()]);
  }
}
