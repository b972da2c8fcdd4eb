// What a forwarding proxy changes in the messages it passes on (RFC 9110 §7.6, RFC 9112 §3.2):
// hop-by-hop fields, the request target it sends, Max-Forwards, and the 1xx answers it relays.
// http-forward.ts does the forwarding; this module holds the rules, free of sockets.
import { STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { formatHostPort } from '../core/address.js';
import { BadRequestError, CommandNotSupportedError, type ProxyError } from '../core/errors.js';

const HOP_BY_HOP = [
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
];

/**
 * Fields `Connection` may never name: they frame the message or say where it goes. Letting a
 * client drop Content-Length would send a GET body upstream unframed, read there as a second
 * request (request smuggling).
 */
const NEVER_CONNECTION_OPTIONS = new Set(['content-length', 'transfer-encoding', 'host']);

/** rawHeaders minus hop-by-hop fields, the fields Connection names (bar framing ones), and `drop`. */
export function endToEndHeaders(rawHeaders: readonly string[], drop: readonly string[] = []): string[] {
  const remove = new Set([...HOP_BY_HOP, ...drop]);
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'connection') continue;
    for (const token of rawHeaders[i + 1]!.split(',')) {
      const name = token.trim().toLowerCase();
      if (!NEVER_CONNECTION_OPTIONS.has(name)) remove.add(name);
    }
  }
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!remove.has(rawHeaders[i]!.toLowerCase())) out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

/**
 * Why a request body cannot be forwarded as framed, if it cannot; the connection closes after the
 * answer. HTTP/1.0 has no Transfer-Encoding: a 1.0 sender may know nothing of chunked and meant
 * the bytes as its next request, so the framing is faulty (RFC 9112 §6.1: 400 and close, as
 * nginx does). Node's parser takes a body apart by its last coding (chunked) only; one before it
 * (gzip, chunked) would reach the origin unlabelled: 501 for codings not done (RFC 9112 §6.1).
 */
export function bodyFramingRefusal(httpVersion: string, codings: string | undefined): ProxyError | undefined {
  if (codings === undefined) return undefined;
  if (httpVersion === '1.0') return new BadRequestError('an HTTP/1.0 request cannot carry Transfer-Encoding: its body framing is ambiguous');
  if (codings.trim().toLowerCase() === 'chunked') return undefined;
  return new CommandNotSupportedError(
    `request bodies in transfer coding "${codings.slice(0, 100)}" are not forwarded; send them chunked or with a Content-Length`,
  );
}

/**
 * Fields the trailer section may forward (RFC 9110 §6.5): the end-to-end ones, less those that
 * frame, route or describe the content, which a sender must not put there and a recipient
 * merging trailers into the header section must never take from there.
 */
const NEVER_TRAILERS = ['content-length', 'content-type', 'content-encoding', 'content-range', 'host', 'authorization', 'set-cookie', 'cookie'];

export function forwardableTrailers(rawTrailers: readonly string[]): [string, string][] {
  const fields = endToEndHeaders(rawTrailers, NEVER_TRAILERS);
  const pairs: [string, string][] = [];
  for (let i = 0; i < fields.length; i += 2) pairs.push([fields[i]!, fields[i + 1]!]);
  return pairs;
}

/** Adds the trailer fields that may go on to an outgoing message, if any; Node refusing one drops them all. */
export function passTrailers(message: { addTrailers(trailers: [string, string][]): void }, rawTrailers: readonly string[]): void {
  const trailers = forwardableTrailers(rawTrailers);
  if (trailers.length === 0) return;
  try {
    message.addTrailers(trailers);
  } catch {
    // A name or value Node will not write: the body goes on whole, without its trailers.
  }
}

/**
 * The origin-form target to send for an absolute-form one: its raw path and query, never the
 * URL object's normalised form (a proxy must not rewrite them). An OPTIONS with an empty path and
 * no query asks about the server as a whole and goes on as `*` (RFC 9112 §3.2.4).
 */
export function originFormTarget(absoluteUrl: string, method: string | undefined): string {
  const pathAndQuery = /^http:\/\/[^/?#]*([^#]*)/i.exec(absoluteUrl)?.[1] ?? '';
  if (pathAndQuery === '' && method === 'OPTIONS') return '*';
  return pathAndQuery.startsWith('/') ? pathAndQuery : `/${pathAndQuery}`;
}

/**
 * Max-Forwards on TRACE and OPTIONS (RFC 9110 §7.6.2): 0 means this proxy is the final
 * recipient and answers itself; otherwise the request goes on with the value one lower. Other
 * methods, and a value that is not a number, pass unchanged.
 */
export type MaxForwards = { answerHere: true } | { answerHere: false; forwardAs?: string };

export function maxForwardsFor(method: string | undefined, value: string | undefined): MaxForwards {
  if ((method !== 'TRACE' && method !== 'OPTIONS') || value === undefined || !/^\s*\d+\s*$/.test(value)) return { answerHere: false };
  const hops = Number(value);
  if (hops === 0) return { answerHere: true };
  return { answerHere: false, forwardAs: String(Math.min(hops, Number.MAX_SAFE_INTEGER) - 1) };
}

/** Methods this proxy forwards (Allow in its own OPTIONS answer). */
const ALLOWED = 'GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT';

/** Fields a TRACE reflection leaves out: credentials the page reading it should never see. */
const NOT_REFLECTED = new Set(['authorization', 'proxy-authorization', 'cookie']);

/**
 * The proxy's own answer to a TRACE or OPTIONS whose Max-Forwards ran out: OPTIONS gets the
 * methods it forwards; TRACE gets the request it received back as message/http (RFC 9110
 * §9.3.8), without credentials (headers or URL userinfo).
 */
export function finalRecipientAnswer(req: IncomingMessage): { headers: OutgoingHttpHeaders; body: string } {
  if (req.method === 'OPTIONS') return { headers: { Allow: ALLOWED, 'Content-Length': 0 }, body: '' };
  // Credentials in the URL (http://user:pass@host/) are left out as the headers' are.
  const target = (req.url ?? '').replace(/^(http:\/\/)[^/?#@]*@/i, '$1');
  const lines = [`${req.method} ${target} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (!NOT_REFLECTED.has(req.rawHeaders[i]!.toLowerCase())) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  }
  const body = `${lines.join('\r\n')}\r\n\r\n`;
  return { headers: { 'Content-Type': 'message/http', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body) }, body };
}

/** A Link field value split into its links: at commas outside <URI> and quoted strings (RFC 8288 §3). */
export function splitLinks(value: string): string[] {
  const links: string[] = [];
  let inUri = false;
  let inQuotes = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (inQuotes) {
      if (c === '\\') i++;
      else if (c === '"') inQuotes = false;
    } else if (c === '"') inQuotes = true;
    else if (c === '<') inUri = true;
    else if (c === '>') inUri = false;
    else if (c === ',' && !inUri) {
      links.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  links.push(value.slice(start).trim());
  return links.filter((link) => link !== '');
}

/**
 * The fields of an origin's 103 Early Hints as Node's writeEarlyHints takes them (its `link`
 * key is required: one link per entry), or undefined when it has no Link to pass on.
 */
export function earlyHintsFrom(rawHeaders: readonly string[]): Record<string, string | string[]> | undefined {
  const hints: Record<string, string | string[]> = {};
  const links: string[] = [];
  const fields = endToEndHeaders(rawHeaders);
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!.toLowerCase();
    if (name === 'link') links.push(...splitLinks(fields[i + 1]!));
    else hints[name] = fields[i + 1]!;
  }
  if (links.length === 0) return undefined;
  hints.link = links;
  return hints;
}

/**
 * What an origin did when the exchange failed after its stream opened, in words: Node's own texts
 * ("socket hang up", "Parse Error: Expected HTTP/") say nothing to someone who reached a TCP
 * service with http://. `headLimit` is the largest response head taken, for its message.
 */
export function originFailure(err: NodeJS.ErrnoException, headLimit: string, to?: { host: string; port: number }): string {
  const code = err.code ?? '';
  // A TLS server sent plain HTTP (http://web:443/) mostly hangs up or resets without a word (OpenSSL, Node, Java).
  const tls = to && TLS_PORTS.has(to.port) ? `: port ${to.port} is usually HTTPS, ask for https://${formatHostPort(to.host, to.port)}/ (a CONNECT tunnel)` : '';
  if (code === 'HPE_HEADER_OVERFLOW') return `the origin's response head is larger than ${headLimit}`;
  if (code.startsWith('HPE_')) return `the origin's answer is not HTTP/1.x (${err.message}): is it an HTTP server? Other protocols go through CONNECT or SOCKS`;
  if (code === 'ECONNRESET' && err.message === 'socket hang up') return `the origin closed the connection without answering${tls}`;
  if (code === 'ECONNRESET') return `the origin reset the connection${tls}`;
  return `the exchange with the origin failed: ${err.message}`;
}

/** Ports whose servers speak TLS first, as a rule: a plain-HTTP request there is a wrong scheme. */
const TLS_PORTS = new Set([443, 6443, 8443, 9443]);

/** Longest message a refusal's reason phrase carries: OpenBSD nc reads the status line into 1 KiB. */
const MAX_REASON_MESSAGE = 360;

/**
 * The reason phrase of an answer we make up, with our message after the standard one
 * (`502 Bad Gateway (kubectl-proxyout: …)`). Go's client (kubectl, every client-go program),
 * Java's HttpURLConnection, Python's urllib, wget and nc show a refused CONNECT or request by its
 * status line alone, never the body naming the route. Printable ASCII only (no CR or LF), bounded.
 */
export function reasonWithMessage(status: number, message: string): string {
  const standard = STATUS_CODES[status] ?? 'Error';
  const text = message.trim().replace(/[^\x20-\x7e]/g, '?');
  if (text === '') return standard;
  return `${standard} (${text.length > MAX_REASON_MESSAGE ? `${text.slice(0, MAX_REASON_MESSAGE)}...` : text})`;
}
