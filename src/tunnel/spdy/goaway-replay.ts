// What a SPDY port-forward stream (pf-stream.ts) keeps so that a GOAWAY crossing its SYN_STREAMs
// costs the client nothing. spdystream (the kubelet's side, connection.go) drops every SYN_STREAM
// that arrives after its GOAWAY without a word, and the GOAWAY names the last stream it took
// (draft-mbelshe-httpbis-spdy-00 §2.6.6): our streams above it never reached the pod, nor did a
// byte written on them. So the stream opens its pair again on a fresh tunnel to the same pod and
// writes there what it had written — as golang.org/x/net/http2's Transport retries a request a
// GOAWAY left unprocessed on a new connection by itself (transport.go, errClientConnGotGoAway,
// the body written again from GetBody). A GOAWAY is the session's affair, and the pod is the same:
// the route above never hears of it.
//  - Kept: references to the chunks written on the data stream (no copies) and whether FIN
//    followed, only while the kubelet has not replied to both SYN_STREAMs — a warm stream writes
//    before the replies; the stream drops the replay at the second SYN_REPLY, one kubelet round
//    trip after it opened.
//  - At most MAX_REPLAY_BYTES: a client that writes more before the replies gives the chance up,
//    and a GOAWAY then fails the stream (retryable: the route moves it to another endpoint if it
//    still can).
//  - At most MAX_MOVES new tunnels per stream: a kubelet that keeps going away does not hold the
//    stream in a loop; the next one fails it the same way.
import { ProxyError } from '../../core/errors.js';
import { MAX_REPLAY_BYTES, type PodPort } from '../transport.js';
import type { PodStreamHooks, TunnelSlot } from './tunnel-slot.js';
import type { SpdyStream } from './stream.js';

/** How often one stream is opened again on a new tunnel after GOAWAYs left it out. */
export const MAX_MOVES = 2;

/** What a move needs of the stream it moves (pf-stream.ts). */
export interface PairOwner {
  readonly destroyed: boolean;
  /**
   * Gives back the tunnel slot it holds, takes `slot`, and opens its pair on that tunnel: the new
   * data stream, or undefined when that tunnel took none (the owner then moved on again, or failed).
   */
  adopt(slot: TunnelSlot): SpdyStream | undefined;
  /** Fails the open with `err`, or the stream once open. */
  failStream(err: ProxyError): void;
  /** Calls `callback` once the tunnel has room for more writes. */
  afterWrite(callback: () => void): void;
}

export class GoAwayReplay {
  /** What was written on the data stream; undefined once more than the cap came. */
  private chunks: Buffer[] | undefined = [];
  private bytes = 0;
  private fin = false;
  private moves = 0;
  /** A new tunnel is being asked for: writes wait (holdWrite), FIN is only noted. */
  moving = false;
  /** The client write that came during a move: called back once the move is over. */
  private heldWrite?: () => void;
  /** Made at the first move: aborts the tunnel being asked for when the stream goes. */
  private gone?: AbortController;

  constructor(private readonly maxBytes = MAX_REPLAY_BYTES) {}

  /** Nothing was written on the data stream yet, not even FIN. */
  get nothingWritten(): boolean {
    return this.chunks !== undefined && this.bytes === 0 && !this.fin;
  }

  /** Bytes kept (tests). */
  get keptBytes(): number {
    return this.bytes;
  }

  /**
   * A chunk written on the data stream; past the cap nothing is kept any more. True when a move
   * is under way: then `callback` is held until the chunk is written on the new pair.
   */
  keep(chunk: Buffer, callback: () => void): boolean {
    if (this.chunks && this.bytes + chunk.length <= this.maxBytes) {
      this.chunks.push(chunk);
      this.bytes += chunk.length;
    } else {
      this.chunks = undefined;
      this.bytes = 0;
    }
    if (this.moving) this.heldWrite = callback;
    return this.moving;
  }

  /** The client finished: FIN on the data stream. */
  keepFin(): void {
    this.fin = true;
  }

  /**
   * The kubelet never took `owner`'s pair: asks `hooks` for a new tunnel to `target`, moves the
   * owner there and writes on its new pair what was kept, FIN too. The owner fails with `err` (or
   * the new tunnel's own error) when it may not move again or no tunnel came.
   */
  move(owner: PairOwner, hooks: PodStreamHooks, target: PodPort, err: ProxyError): void {
    if (!this.chunks || this.moves >= MAX_MOVES) return owner.failStream(err);
    this.moves++;
    this.moving = true;
    this.gone ??= new AbortController();
    hooks.reopen(target, this.gone.signal).then(
      (slot) => {
        // Gone meanwhile, or a write during the move took the kept bytes past the cap.
        if (owner.destroyed || !this.chunks) {
          slot.hooks.release();
          return owner.failStream(err);
        }
        const data = owner.adopt(slot);
        if (!data) return;
        this.moving = false;
        for (const chunk of this.chunks) data.write(chunk);
        if (this.fin) data.end();
        const held = this.takeHeldWrite();
        if (held) owner.afterWrite(held);
      },
      (reopenErr: unknown) => owner.failStream(reopenErr instanceof ProxyError ? reopenErr : err),
    );
  }

  /** The stream is gone: a move under way stops, a held write is let go. */
  abandon(): void {
    this.moving = false;
    this.gone?.abort();
    this.takeHeldWrite()?.();
  }

  private takeHeldWrite(): (() => void) | undefined {
    const callback = this.heldWrite;
    this.heldWrite = undefined;
    return callback;
  }
}
