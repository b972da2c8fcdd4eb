import net from 'node:net';
import { once } from 'node:events';

export interface SocksConnectResult {
  /** The SOCKS5 REP byte (0 = succeeded). */
  reply: number;
  /** Bound address from the reply. */
  bound?: { host: string; port: number };
  socket: net.Socket;
  /** Bytes that arrived after the reply. */
  rest: Buffer;
}

/** A deliberately minimal RFC 1928 client so tests see the exact reply code. */
export async function socks5Connect(
  proxy: string,
  host: string,
  port: number,
  opts: { atyp?: 'domain' | 'ipv4' | 'ipv6'; pipelined?: Buffer; auth?: { user: string; password: string } } = {},
): Promise<SocksConnectResult> {
  const [phost, pport] = splitHostPort(proxy);
  const socket = net.connect(pport, phost);
  await once(socket, 'connect');
  const reader = new Reader(socket);
  socket.write(Buffer.from([5, 1, opts.auth ? 2 : 0]));
  const method = await reader.read(2);
  if (method[1] !== (opts.auth ? 2 : 0)) throw new Error(`method ${method[1]}`);
  if (opts.auth) {
    // RFC 1929 username/password.
    const [user, password] = [Buffer.from(opts.auth.user), Buffer.from(opts.auth.password)];
    socket.write(Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([password.length]), password]));
    const verdict = await reader.read(2);
    if (verdict[1] !== 0) throw new Error(`credentials refused (${verdict[1]})`);
  }
  const atyp = opts.atyp ?? (net.isIPv4(host) ? 'ipv4' : net.isIPv6(host) ? 'ipv6' : 'domain');
  let addr: Buffer;
  if (atyp === 'ipv4') addr = Buffer.from([1, ...host.split('.').map(Number)]);
  else if (atyp === 'ipv6') addr = Buffer.concat([Buffer.from([4]), ipv6Bytes(host)]);
  else addr = Buffer.concat([Buffer.from([3, Buffer.byteLength(host)]), Buffer.from(host)]);
  const portBuf = Buffer.alloc(2);
  portBuf.writeUInt16BE(port);
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), addr, portBuf, opts.pipelined ?? Buffer.alloc(0)]));
  const head = await reader.read(4);
  let bound: SocksConnectResult['bound'];
  if (head[3] === 1) {
    const b = await reader.read(6);
    bound = { host: [...b.subarray(0, 4)].join('.'), port: b.readUInt16BE(4) };
  } else if (head[3] === 4) {
    const b = await reader.read(18);
    bound = { host: b.subarray(0, 16).toString('hex'), port: b.readUInt16BE(16) };
  } else if (head[3] === 3) {
    const len = (await reader.read(1))[0];
    const b = await reader.read(len + 2);
    bound = { host: b.subarray(0, len).toString(), port: b.readUInt16BE(len) };
  }
  return { reply: head[1], bound, socket, rest: reader.detach() };
}

export function splitHostPort(addr: string): [string, number] {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(addr);
  if (!m) throw new Error(`bad address ${addr}`);
  return [m[1], Number(m[2])];
}

function ipv6Bytes(ip: string): Buffer {
  const [head, tail] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const buf = Buffer.alloc(16);
  groups.forEach((g, i) => buf.writeUInt16BE(parseInt(g, 16), i * 2));
  return buf;
}

/** Reads exact byte counts from a socket without losing what arrives after. */
export class Reader {
  private buf = Buffer.alloc(0);
  private waiter?: () => void;
  private ended = false;
  private readonly onData = (c: Buffer) => {
    this.buf = Buffer.concat([this.buf, c]);
    this.waiter?.();
  };
  private readonly onEnd = () => {
    this.ended = true;
    this.waiter?.();
  };
  /** The error the connection ended with (ECONNRESET: its upstream broke, listeners/relay.ts). */
  error?: Error;
  constructor(private readonly socket: net.Socket) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    // A reset ends the connection as a FIN does ('close' follows), and says it was cut.
    socket.on('error', (err: Error) => (this.error ??= err));
    socket.resume();
  }
  /** Exactly n bytes; fails (rather than hangs) when they do not come within timeoutMs. */
  async read(n: number, timeoutMs = 20_000): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    while (this.buf.length < n) {
      if (this.ended) throw new Error(`connection closed after ${this.buf.length} of ${n} bytes${this.error ? ` (${this.error.message})` : ''}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${this.buf.length} of ${n} bytes arrived within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const timer = setTimeout(r, left);
        this.waiter = () => {
          clearTimeout(timer);
          r();
        };
      });
      this.waiter = undefined;
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  /** Everything until the peer ends the connection. */
  async readAll(): Promise<Buffer> {
    while (!this.ended) {
      await new Promise<void>((r) => (this.waiter = r));
      this.waiter = undefined;
    }
    return this.buf;
  }
  detach(): Buffer {
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.pause();
    return this.buf;
  }
}
