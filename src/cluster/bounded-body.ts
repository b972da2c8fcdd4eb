// An API answer's body, decoded (content-encoding.ts) and read up to a bound: a server that sends
// without end, or a gzip bomb, must not take all memory. An error answer's start is enough for its
// message; a success beyond its bound is refused. Shared by getJson (api.ts) and doctor's POSTs.
import type { ClientRequest, IncomingMessage } from 'node:http';
import { bodyDecoder, type BodyDecoder } from './content-encoding.js';

export interface BodyBounds {
  /** For a 2xx answer. */
  ok: number;
  /** For any other. */
  error: number;
}

/** The text read (whole, or an error answer's start) · why the answer was refused · the socket's failure. */
export type BodyRead = { text: string } | { refused: string } | { failed: Error };

/** Reads `res` and calls `done` once; the request is destroyed when the answer is cut. */
export function readBoundedBody(req: ClientRequest, res: IncomingMessage, path: string, bounds: BodyBounds, done: (read: BodyRead) => void): void {
  const status = res.statusCode ?? 0;
  const ok = status >= 200 && status < 300;
  const limit = ok ? bounds.ok : bounds.error;
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  const finish = (read: BodyRead) => {
    if (over) return;
    over = true;
    done(read);
  };
  const cut = (read: BodyRead) => {
    req.destroy();
    finish(read);
  };
  let decode: BodyDecoder;
  try {
    decode = bodyDecoder(res.headers);
  } catch (err) {
    return cut({ refused: `${path}: ${(err as Error).message}` });
  }
  res.on('data', (raw: Buffer) => {
    if (over) return;
    let c: Buffer;
    try {
      c = decode(raw);
    } catch (err) {
      return cut({ refused: `${path}: ${(err as Error).message}` });
    }
    size += c.length;
    if (size <= limit) return void chunks.push(c);
    cut(ok ? { refused: `the answer to ${path} is larger than ${limit / 1024 / 1024} MiB` } : { text: Buffer.concat(chunks).toString('utf8') });
  });
  res.on('error', (err) => finish({ failed: err }));
  res.on('end', () => finish({ text: Buffer.concat(chunks).toString('utf8') }));
}
