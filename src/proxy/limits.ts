// The cap on concurrent streams (--max-streams). Every stream holds a client socket, buffers and
// a tunnel stream; without a cap a burst of clients (or a runaway script) exhausts file
// descriptors or memory and takes every other stream down with the process. Past the cap a new
// connection is refused at once with OverloadedError (SOCKS 0x01, HTTP 503), which the listeners
// report and StreamStats logs and counts like any other failure.
//
// The cap counts what clients hold, never our own tear-down: a stream stops counting once its
// client has finished sending (the relay ends the upstream side on the client's FIN: 'finish'),
// or when it closes, whichever comes first. What is left after the client's FIN — the pod's last
// bytes, the kubelet's ~1 s close grace, the RST that bounds it — is the proxy's business and
// bounded on its own (listeners/relay.ts), so a churning client is never refused under the cap.
// A pooled HTTP upstream stream idle between requests holds no slot either (slot.release() when
// it goes back to the pool, slot.retake() when a request reuses it).
import type { OpenRequest, OpenedStream, StreamOpener, StreamSlot } from '../core/types.js';
import { OverloadedError, errorMessage, outOfFiles } from '../core/errors.js';
import { streamsWithin } from './file-limit.js';

export class StreamLimiter implements StreamOpener {
  private active = 0;
  /** Why the cap is lower than --max-streams asked, for the refusal message. */
  private lowered?: string;

  constructor(
    private readonly inner: StreamOpener,
    /** 0 or less: no limit. */
    private max: number,
    /** Upstreams idle in a pool: no slot, but a file each over a per-stream WebSocket (listeners/idle-upstreams.ts). */
    private readonly idle?: { count(): number; shed(n: number): number },
  ) {}

  get maxStreams(): number {
    return this.max;
  }

  /**
   * Lowers the cap to what `limit` open files hold (proxy/file-limit.ts); returns the new cap,
   * or undefined when --max-streams already fits.
   */
  fitOpenFiles(limit: number): number | undefined {
    const fits = streamsWithin(limit);
    if (this.max > 0 && this.max <= fits) return undefined;
    this.max = fits;
    this.lowered = `the open-file limit (ulimit -n) is ${limit}`;
    return fits;
  }

  /** Streams holding a slot: open (their client still sending), or still opening. */
  get inUse(): number {
    return this.active;
  }

  async open(request: OpenRequest): Promise<OpenedStream> {
    if (this.max > 0 && this.active >= this.max) {
      const why = this.lowered ? `, as ${this.lowered}` : ' (--max-streams)';
      throw new OverloadedError(`too many concurrent streams: ${this.active} open, the limit is ${this.max}${why}`);
    }
    // The cap bounds the upstream files the file limit leaves room for: a new stream takes the
    // room of idle pooled ones (the oldest), which would else push the proxy past the limit.
    // Only one let in: a refused one would close them for nothing, and a request may reuse them.
    const over = this.max > 0 && this.idle ? this.active + this.idle.count() + 1 - this.max : 0;
    if (over > 0) this.idle!.shed(over);
    // The slot is taken while opening too: a flood of slow opens must not get past the cap.
    this.active++;
    let opened: OpenedStream;
    try {
      opened = await this.inner.open(request);
    } catch (err) {
      this.active--;
      // No file for a tunnel or a dial: the proxy is full, whatever route it was for (not a
      // failure of the API server or the pod, which the client would be told).
      if (outOfFiles(err) && !(err instanceof OverloadedError))
        throw new OverloadedError(`no file descriptor left to open the stream (the open-file limit, ulimit -n, is reached): ${errorMessage(err)}`, {
          cause: err,
        });
      throw err;
    }
    const slot = new LimiterSlot(this);
    const { stream } = opened;
    if (stream.destroyed || stream.writableFinished) slot.release();
    else {
      // `on`, not `once` (each event comes once; the slot's methods are idempotent): once() would
      // add two objects per listener to what a lingering stream holds.
      stream.on('finish', slot.release);
      stream.on('close', slot.close);
    }
    return { ...opened, slot };
  }

  /** For LimiterSlot only. */
  adjust(delta: 1 | -1): void {
    this.active += delta;
  }
}

/** A class rather than closures over open()'s scope: each open stream holds this object and its two listeners. */
class LimiterSlot implements StreamSlot {
  private held = true;
  private closed = false;

  constructor(private readonly limiter: StreamLimiter) {}

  readonly release = (): void => {
    if (!this.held) return;
    this.held = false;
    this.limiter.adjust(-1);
  };

  retake(): void {
    if (this.held || this.closed) return;
    this.held = true;
    this.limiter.adjust(1);
  }

  readonly close = (): void => {
    this.closed = true;
    this.release();
  };
}
