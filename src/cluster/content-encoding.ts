// A front before the API server (an ingress, a gateway) may gzip answers nobody asked to be
// gzipped. kubectl never notices: Go's transport asks for gzip itself and decodes what comes.
// Node's http client decodes nothing, so JSON.parse would get compressed bytes ("invalid JSON",
// a watch failing on its first event). We do not ask for gzip (the API server would then spend
// CPU compressing every large list), but decode what arrives so encoded.
import type http from 'node:http';
import { Inflate, Z_SYNC_FLUSH } from 'pako';

/** Turns each chunk of a response body as it came into the bytes it encodes (in order). */
export type BodyDecoder = (chunk: Buffer) => Buffer;

const identity: BodyDecoder = (chunk) => chunk;

/**
 * The decoder for a response's Content-Encoding: gzip and deflate (zlib) are inflated chunk by
 * chunk as they come, synchronously (pako), so each watch event is handed on as soon as its
 * bytes are in. Throws for a coding we cannot decode.
 */
export function bodyDecoder(headers: http.IncomingHttpHeaders): BodyDecoder {
  const coding = String(headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  if (coding === '' || coding === 'identity') return identity;
  if (coding !== 'gzip' && coding !== 'x-gzip' && coding !== 'deflate')
    throw new Error(`the answer is encoded as "${coding.slice(0, 40)}", which the proxy cannot decode (something in front of the API server encoded it)`);
  let out: Uint8Array[] = [];
  const start = (): Inflate => {
    // pako's default window bits detect gzip and zlib headers alike.
    const i = new Inflate({ chunkSize: 64 * 1024 });
    i.onData = (chunk: Uint8Array) => out.push(chunk);
    return i;
  };
  let inflate = start();
  return (chunk) => {
    // pako takes nothing after a stream's end and says nothing (push is true). gzip may go on
    // with another member (RFC 1952 §2.2), which Go's gzip.Reader, and so kubectl, reads on: a
    // front that gzips each flush of a watch on its own lost every event after its first.
    if (inflate.ended && chunk.length > 0) {
      if (coding === 'deflate') throw new Error('the deflate-encoded answer goes on after its end');
      inflate = start();
    }
    if (!inflate.push(chunk, Z_SYNC_FLUSH)) throw new Error(`the ${coding}-encoded answer does not decode: ${inflate.msg || `inflate error ${inflate.err}`}`);
    const parts = out;
    out = [];
    if (parts.length === 1) return Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, parts[0]!.length);
    return Buffer.concat(parts);
  };
}
