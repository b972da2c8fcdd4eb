// Answers a WebSocket peer's pings without queueing an answer per ping. RFC 6455 §5.5.3: "If an
// endpoint receives a Ping frame and has not yet sent Pong frame(s) in response to previous Ping
// frame(s), the endpoint MAY elect to send a Pong frame for only the most recently processed Ping
// frame." A server that sends pings faster than it reads our pongs (or has stopped reading) would
// otherwise grow our send queue by a frame per ping, without bound: `ws` and a plain answer-each
// loop both do. So one pong is in flight at a time, and while it waits only the latest ping's
// payload is kept. A peer that reads its pongs sees one per ping, as before. (The SPDY-level
// equivalent, PING echoes, is spdy/owed-replies.ts; SPDY has no "latest only" rule, so there the
// session ends past a bound.)

/** Writes a pong frame with `payload`; calls `done` once the socket has taken it (or failed). Returns false if nothing could be written. */
export type PongWriter = (payload: Buffer, done: () => void) => boolean;

export class PongPacer {
  private inFlight = false;
  /** The latest ping's payload, while a pong is in flight. */
  private owed?: Buffer;

  constructor(private readonly write: PongWriter) {}

  /** Whether a pong is waiting to leave (tests). */
  get waiting(): boolean {
    return this.inFlight;
  }

  ping(payload: Buffer): void {
    if (this.inFlight) {
      // Copied: the payload may be a view of the socket's read buffer (≤ 125 bytes, §5.5).
      this.owed = Buffer.from(payload);
      return;
    }
    this.send(payload);
  }

  private send(payload: Buffer): void {
    this.inFlight = true;
    if (!this.write(payload, this.sent)) this.inFlight = false;
  }

  private readonly sent = (): void => {
    this.inFlight = false;
    const next = this.owed;
    this.owed = undefined;
    if (next) this.send(next);
  };
}
