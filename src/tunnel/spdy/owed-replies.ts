// Replies a SPDY peer makes us owe — PING echoes, RST_STREAMs refusing its SYN_STREAMs — counted
// while they wait to be sent. A peer that sends PINGs faster than it reads our echoes (or has
// stopped reading) would otherwise grow our send queue without bound. golang.org/x/net/http2's
// server (server.go, maxQueuedControlFrames) ends a connection past 10,000 queued control frames
// ("too many control frames in send queue"; ENHANCE_YOUR_CALM in HTTP/2 terms); moby/spdystream
// (connection.go handlePingFrame) writes each echo before it reads on, so such a peer only blocks
// itself. We count until the wire says the replies left (SessionWire.whenSent) and end the session
// past the same 10,000: some 120 KiB of echoes, where a keepalive PING now and then queues one.
import type { SessionWire } from './session.js';

export const MAX_QUEUED_REPLIES = 10_000;

/** The peer made us owe more than MAX_QUEUED_REPLIES replies while not reading them. */
export class SpdyFloodError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpdyFloodError';
  }
}

export class OwedReplies {
  /** Replies written and not yet known to have left. */
  private queued = 0;
  /** How many of them the pending whenSent call covers (0: none pending). */
  private awaited = 0;

  constructor(private readonly wire: Pick<SessionWire, 'whenSent'>) {}

  /** Replies not yet known to have left (tests). */
  get unsent(): number {
    return this.queued;
  }

  /** The error that ends the session when one more reply would pass the bound; undefined while within it. */
  flood(): SpdyFloodError | undefined {
    if (this.queued < MAX_QUEUED_REPLIES) return undefined;
    return new SpdyFloodError(`the peer sent PINGs (or streams to refuse) faster than it read the replies: ${this.queued} replies unsent`);
  }

  /** One reply was just written to the wire. */
  written(): void {
    if (!this.wire.whenSent) return;
    this.queued++;
    if (this.awaited === 0) this.await();
  }

  private await(): void {
    this.awaited = this.queued;
    this.wire.whenSent!(this.sent);
  }

  /** Every reply written before await() has left: one callback per batch of replies, not per reply. */
  private readonly sent = (): void => {
    this.queued -= this.awaited;
    this.awaited = 0;
    if (this.queued > 0) this.await();
  };
}
