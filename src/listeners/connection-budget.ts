// How many client connections every listener together may hold open: what the open-file limit
// leaves once the proxy's own files (tunnels, API connections, the control socket, logs) are
// kept back (proxy/file-limit.ts). Past it a new client is closed at once, with a log line;
// without it idle or half-open clients could take every descriptor, and then the runtime closed
// new clients unseen, `status` read the daemon as hung (its control socket was refused), and no
// tunnel or watch could reconnect.
import type net from 'node:net';
import type { Logger } from '../core/log.js';
import { RepeatedLineLimiter } from '../core/log-limit.js';
import { clientName } from './server-base.js';

export class ConnectionBudget {
  private open = 0;
  private max = Infinity;
  private maxWithUpstreams = Infinity;
  private why = '';
  private readonly lines: RepeatedLineLimiter;

  /**
   * `upstreams`: the files open streams hold beside their clients' (a WebSocket, a direct
   * connection): they count against the budget too, or clients and streams together would take
   * the files kept back for the proxy's own. `idle`: those of them no client uses (idle in a
   * pool), which a client that would be refused for want of their room gets instead.
   */
  constructor(
    log: Logger,
    private readonly upstreams: () => number = () => 0,
    private readonly idle?: { count(): number; shed(n: number): number },
  ) {
    this.lines = new RepeatedLineLimiter(log);
  }

  /** At stop: the refusal lines held back are summed up now. */
  flushLog(): void {
    this.lines.flush();
  }

  /**
   * From now on at most `max` client connections, and at most `maxWithUpstreams` of them and the
   * streams' upstream files together; `why` ends the refusal line.
   */
  limit(max: number, maxWithUpstreams: number, why: string): void {
    this.max = max;
    this.maxWithUpstreams = maxWithUpstreams;
    this.why = why;
  }

  /** On accept: true when the connection counts (call release() at its close), false when it was closed. */
  take(socket: net.Socket): boolean {
    let upstreams = this.upstreams();
    const over = this.open + upstreams + 1 - this.maxWithUpstreams;
    // Only when that lets it in: too few of them were else closed for a client refused anyway.
    if (over > 0 && this.open < this.max && this.idle && this.idle.count() >= over && this.idle.shed(over) > 0) upstreams = this.upstreams();
    if (this.open < this.max && this.open + upstreams < this.maxWithUpstreams) {
      this.open++;
      return true;
    }
    const client = clientName(socket);
    socket.on('error', () => undefined);
    socket.destroy();
    const streams = upstreams > 0 ? ` (and ${upstreams} streams' upstream connections)` : '';
    this.lines.write(
      'warn',
      'connection budget',
      { client, openConnections: this.open, upstreams },
      `client connection refused: ${this.open} are open${streams}, ${this.why}`,
    );
    return false;
  }

  release(): void {
    this.open--;
  }
}
