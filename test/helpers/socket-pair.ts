// A connected TCP pair on 127.0.0.1 for unit tests of what listeners do with a client socket.
import net from 'node:net';
import { once } from 'node:events';

/** `outer` is what a test drives (the client), `inner` the accepted socket the code under test gets. */
export async function socketPair(): Promise<{ outer: net.Socket; inner: net.Socket; close: () => void }> {
  const server = net.createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const accepted = once(server, 'connection');
  const outer = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const [[inner]] = (await Promise.all([accepted, once(outer, 'connect')])) as [[net.Socket], unknown];
  outer.on('error', () => {});
  inner.on('error', () => {});
  return { outer, inner, close: () => server.close() };
}

/** Runs `fn` with a fresh pair; both sockets and the server are closed afterwards, whatever happened. */
export async function withSocketPair<T>(fn: (pair: { outer: net.Socket; inner: net.Socket }) => Promise<T>): Promise<T> {
  const pair = await socketPair();
  try {
    return await fn(pair);
  } finally {
    pair.outer.destroy();
    pair.inner.destroy();
    pair.close();
  }
}

/** Records what reaches the socket's write methods: one entry per write, the buffers it carried. */
export function spyWrites(socket: net.Socket): Buffer[][] {
  const writes: Buffer[][] = [];
  const s = socket as unknown as {
    _write(chunk: Buffer, enc: BufferEncoding, cb: (err?: Error | null) => void): void;
    _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void;
  };
  const write = s._write.bind(socket);
  const writev = s._writev.bind(socket);
  s._write = (chunk, enc, cb) => {
    writes.push([chunk]);
    write(chunk, enc, cb);
  };
  s._writev = (chunks, cb) => {
    writes.push(chunks.map((c) => c.chunk));
    writev(chunks, cb);
  };
  return writes;
}
