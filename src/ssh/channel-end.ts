// Destroying a direct-tcpip channel the way a socket is destroyed. ssh2's Channel.destroy()
// (lib/Channel.js) only sends EOF and CHANNEL_CLOSE: the stream itself is left as it was, and
// ssh2 emits its 'close' only after the peer's CHANNEL_CLOSE, and then only after its 'end'
// (lib/utils.js onCHANNEL_CLOSE), which a stream nobody reads any more never emits. A channel
// destroyed with data still unread — a client that left mid-download, a TLS socket (a `via` API
// connection) destroyed mid-response — so never closed: the relay never finished, and the
// route's close() waited for it for ever. Nor does the peer's CHANNEL_CLOSE always come: OpenSSH
// answers ours only once it has written what it holds for the destination (nchan.c
// chan_rcvd_oclose, CHAN_OUTPUT_WAIT_DRAIN), never if the destination has stopped reading.
// The same holds for a channel that carries the next hop of a chain: ssh2 destroys it when that
// hop stops answering keepalives, and a hop behind one that never answered stayed "up" for ever.
import { Duplex } from 'node:stream';
import type { ClientChannel } from 'ssh2';

/**
 * Makes `channel.destroy()` send CHANNEL_CLOSE (RFC 4254 §5.3), destroy the stream, dropping what
 * it holds unread, and emit 'close' on the next tick, as a socket does; the 'close' ssh2 emits
 * later (when the peer's CHANNEL_CLOSE comes, or the connection ends, and ssh2 forgets the
 * channel) is not emitted again. `onDestroyed` runs at the first destroy().
 */
export function closeOnDestroy(channel: ClientChannel, onDestroyed: () => void = () => undefined): void {
  let closeEmitted = false;
  channel.once('close', () => (closeEmitted = true));
  const destroy = function (this: ClientChannel, err?: Error): ClientChannel {
    if (this.destroyed) return this;
    try {
      this.close();
    } catch {
      // Its connection has closed already: ssh2's protocol is unusable then (Protocol.js
      // _destruct), and there is no peer left to tell.
    }
    Duplex.prototype.destroy.call(this, err);
    onDestroyed();
    if (closeEmitted) return this;
    // Installed only now: the channel's data events never pass through it.
    const emit = this.emit;
    this.emit = function (this: ClientChannel, event: string | symbol, ...args: unknown[]): boolean {
      if (event === 'close') {
        if (closeEmitted) return false;
        closeEmitted = true;
      }
      return emit.call(this, event, ...args);
    };
    process.nextTick(() => this.emit('close'));
    return this;
  };
  channel.destroy = destroy;
}
