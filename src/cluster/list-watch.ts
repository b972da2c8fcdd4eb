// The HTTP half of our list+watch client: paged LIST requests and streamed WATCH responses over
// one keep-alive agent per API connection, with the credentials and TLS options ApiConnection
// computes. client-node's informer opens a new connection for every list and watch and gives the
// watch request no timeout; here both use pooled connections and bounded waits.
import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { ApiStatusError, retryAfterSeconds, statusMessage, type ApiConnection } from './api.js';
import { explainHandshakeError, htmlPageMessage, notJsonMessage, redirectMessage } from './foreign-answer.js';
import { bodyDecoder } from './content-encoding.js';
import { timeRoundTrip } from './round-trip.js';
import { honouringRetryAfter } from './retry-after.js';

/** A raw watch event, parsed; its object is slimmed by the caller before anything else. */
export interface RawWatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Record<string, any>;
}

export interface ListPage {
  items: Array<Record<string, any>>;
  resourceVersion: string;
  continueToken?: string;
  remainingItemCount?: number;
}

/** A LIST page must arrive within this (the headers timeout only bounds the wait for headers). */
const PAGE_TIMEOUT_MS = 60_000;

export const isGone = (err: unknown) => err instanceof ApiStatusError && err.statusCode === 410;

/** One watch event longer than this ends the watch (nothing the proxy keeps comes in such objects). */
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** A Status body bigger than this is cut (error bodies only; list pages and watches stream). */
const MAX_ERROR_BODY = 64 * 1024;

/**
 * A LIST page or object larger than this fails its request: far above any real page (500 objects
 * of etcd's 1.5 MiB at most is ~750 MiB only in theory), and below V8's longest string (512 MiB),
 * whose overflow would throw out of the response's 'end' handler and end the process.
 */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

const agents = new WeakMap<ApiConnection, { http: http.Agent; https: https.Agent }>();

/** Kept-alive sockets for every list and watch of one API connection (TLS options are part of the pool key). */
function agentFor(api: ApiConnection, protocol: string): http.Agent {
  let pair = agents.get(api);
  if (!pair) {
    // No cap on sockets: every watch holds one for its life (three or four per watched namespace).
    pair = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
    agents.set(api, pair);
  }
  return protocol === 'http:' ? pair.http : pair.https;
}

/** Ends the pooled connections of an API connection (on stop, so the process can exit). */
export function closeAgents(api: ApiConnection): void {
  const pair = agents.get(api);
  agents.delete(api);
  pair?.http.destroy();
  pair?.https.destroy();
}

export const withQuery = (path: string, query: Record<string, string | undefined>): string => {
  const params = Object.entries(query)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
  if (!params.length) return path;
  return `${path}${path.includes('?') ? '&' : '?'}${params.join('&')}`;
};

/**
 * GET with a limit on the wait for the response headers; resolves with the 2xx response, rejects
 * with ApiStatusError (the Status message) otherwise. `signal` aborts at any time. `timed`: the
 * server answers at once (a watch, a probe; not a list, whose headers wait for its items), so the
 * time to headers is the connection's round trip (round-trip.ts).
 */
export async function apiGet(api: ApiConnection, path: string, signal: AbortSignal, headersTimeoutMs: number, timed = false): Promise<http.IncomingMessage> {
  const options = await api.requestOptions();
  const url = api.url(path);
  const client = url.protocol === 'http:' ? http : https;
  // Our pooled agent, unless a proxy is in between (a kubeconfig proxy-url, an environment proxy,
  // a route it goes through): then the agent made for it. client-node always makes one, with no
  // keep-alive: using it opened a connection (and a TLS handshake) per page and per watch.
  const agent = options.direct ? agentFor(api, url.protocol) : (options.agent ?? agentFor(api, url.protocol));
  const attempt = (again: boolean): Promise<http.IncomingMessage> =>
    new Promise((resolve, reject) => {
      // Aborted while the credentials were worked out: no request (it would fail with no listener yet).
      if (signal.aborted) return reject(abortError(signal));
      const req = client.request(url, { ...options, agent, method: 'GET', signal, headers: { ...options.headers, Accept: 'application/json' } });
      if (timed) timeRoundTrip(api, req);
      // A request destroyed before it has a socket (an agent still dialling: a proxy that never
      // answers its CONNECT) says nothing until one comes: the deadline and the abort settle it here.
      const giveUp = (err: Error) => {
        cleanup();
        req.destroy(err);
        reject(err);
      };
      const timer = setTimeout(() => giveUp(new Error(`headers timeout: no response from the API server within ${headersTimeoutMs} ms`)), headersTimeoutMs);
      const aborted = () => giveUp(abortError(signal));
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
      };
      signal.addEventListener('abort', aborted, { once: true });
      req.on('error', (err: NodeJS.ErrnoException) => {
        cleanup();
        // A kept-alive connection closed as it was reused (the server's idle timeout, a balancer's
        // cut): this GET is sent once more on a new one, as Go's transport does by itself.
        if (!again && req.reusedSocket && err.code === 'ECONNRESET' && !signal.aborted) return resolve(attempt(true));
        reject(explainHandshakeError(err));
      });
      req.on('response', (res) => {
        cleanup();
        const status = res.statusCode ?? 0;
        if (status === 401) api.invalidate();
        else if (status < 500) api.accepted(); // past authentication: the credential is taken
        if (status >= 200 && status < 300) return resolve(res);
        // The error's body gets the same bound as the headers: one that never ends must not hold
        // the caller (a watch whose own deadline starts only once it has its response) for ever.
        const bodyTimer = setTimeout(() => res.destroy(), headersTimeoutMs);
        const retryAfter = retryAfterSeconds(res.headers['retry-after']);
        readText(res, MAX_ERROR_BODY)
          .then(
            (text) => reject(new ApiStatusError(status, redirectMessage(status, res.headers.location) ?? statusMessage(text) ?? `HTTP ${status}`, retryAfter)),
            () => reject(new ApiStatusError(status, `HTTP ${status}`, retryAfter)),
          )
          .finally(() => clearTimeout(bodyTimer));
      });
      req.end();
    });
  return attempt(false);
}

/** What Node's HTTP client rejects an aborted request with. */
function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' });
}

/** The body as text: cut after `max` bytes, or with `tooLarge`, failed with its error. */
function readText(res: http.IncomingMessage, max: number, tooLarge?: () => Error): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let decode: (chunk: Buffer) => Buffer;
    try {
      decode = bodyDecoder(res.headers);
    } catch (err) {
      res.destroy();
      return reject(err);
    }
    res.on('data', (raw: Buffer) => {
      if (size >= max) return;
      let c: Buffer;
      try {
        c = decode(raw);
      } catch (err) {
        res.destroy();
        return reject(err);
      }
      chunks.push(c);
      size += c.length;
      if (tooLarge ? size <= max : size < max) return;
      if (tooLarge) {
        chunks.length = 0;
        reject(tooLarge());
      } else {
        // An error's start is its message: one whose body never ends is answered now, not when
        // its deadline cuts it (and the message with it).
        resolve(Buffer.concat(chunks).subarray(0, max).toString('utf8'));
      }
      res.destroy();
    });
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    // Destroyed before its end (a timeout above): settled as a failure (a no-op after 'end').
    res.on('close', () => reject(new Error('response closed before its end')));
  });
}

const tooLarge = (res: http.IncomingMessage, path: string): ApiStatusError =>
  new ApiStatusError(res.statusCode ?? 0, `the answer to ${path} is larger than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB`);

/** One page of a LIST (`limit` + `continue`, staging/src/k8s.io/client-go/tools/pager/pager.go). */
export async function listPage(
  api: ApiConnection,
  path: string,
  limit: number,
  continueToken: string | undefined,
  signal: AbortSignal,
  timeoutMs: number,
  /** Before each wait the server asked for (Retry-After), in seconds. */
  onWait?: (seconds: number) => void,
): Promise<ListPage> {
  const res = await honouringRetryAfter(
    signal,
    () => apiGet(api, withQuery(path, { limit: String(limit), continue: continueToken }), signal, timeoutMs),
    onWait && ((_err, seconds) => onWait(seconds)),
  );
  const text = await readText(res, MAX_ANSWER_BYTES, () => tooLarge(res, path));
  let body: { metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number }; items?: unknown };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    throw new ApiStatusError(res.statusCode ?? 0, notJsonMessage(path, text));
  }
  return {
    items: Array.isArray(body.items) ? (body.items as ListPage['items']) : [],
    resourceVersion: body.metadata?.resourceVersion ?? '',
    ...(body.metadata?.continue ? { continueToken: body.metadata.continue } : {}),
    ...(typeof body.metadata?.remainingItemCount === 'number' ? { remainingItemCount: body.metadata.remainingItemCount } : {}),
  };
}

/**
 * Streams a watch response: newline-delimited JSON events (apiserver
 * pkg/endpoints/handlers/watch.go), each handed over as soon as its line is complete, so at most
 * one event's raw JSON is held at a time. Resolves when the server ends the watch.
 */
export function streamEvents(res: http.IncomingMessage, onEvent: (e: RawWatchEvent) => void, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    // The start of an event whose line is not complete yet, as it came: only new text is searched
    // for its end. Joined and searched again with each chunk, one 16 MiB event in 16 KiB TLS
    // records cost ~7 s of the event loop (every stream stalled meanwhile).
    let pending: string[] = [];
    let pendingChars = 0;
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      res.destroy();
      reject(err);
    };
    let decode: (chunk: Buffer) => Buffer;
    try {
      decode = bodyDecoder(res.headers);
    } catch (err) {
      return fail(err);
    }
    res.on('data', (raw: Buffer) => {
      if (failed) return;
      let chunk: Buffer;
      try {
        chunk = decode(raw);
      } catch (err) {
        return fail(err);
      }
      const text = decoder.write(chunk);
      let start = 0;
      let nl: number;
      try {
        while ((nl = text.indexOf('\n', start)) >= 0) {
          let line = text.slice(start, nl);
          const lineStart = pending.length === 0 ? start : -1;
          start = nl + 1;
          if (pending.length > 0) {
            pending.push(line);
            line = pending.join('');
            pending = [];
            pendingChars = 0;
          }
          if (line.trim()) onEvent(parseEvent(line, path, text, lineStart));
        }
      } catch (err) {
        return fail(err);
      }
      if (start < text.length) {
        pending.push(start === 0 ? text : text.slice(start));
        pendingChars += text.length - start;
      }
      if (pendingChars > MAX_EVENT_CHARS) fail(new Error(`a watch event over ${MAX_EVENT_CHARS} characters`));
    });
    res.on('error', fail);
    res.on('aborted', () => fail(new Error('watch connection lost')));
    res.on('close', () => {
      if (failed) return;
      if (!res.complete) return fail(new Error('watch connection lost'));
      try {
        const rest = pending.join('') + decoder.end();
        if (rest.trim()) onEvent(parseEvent(rest, path, rest, 0));
      } catch (err) {
        return fail(err);
      }
      resolve();
    });
  });
}

/** How much of a watch answer that is not JSON is looked at for an HTML page's title. */
const PAGE_CHARS = 16 * 1024;

/**
 * One watch event. A line that is not JSON throws a SyntaxError that says what answered: an HTML
 * page (`text` from `at` on, where its title follows the line; -1: the line alone) is a front's.
 */
function parseEvent(line: string, path: string, text: string, at: number): RawWatchEvent {
  let ev: unknown;
  try {
    ev = JSON.parse(line);
  } catch (err) {
    const html = htmlPageMessage(at >= 0 ? text.slice(at, at + PAGE_CHARS) : line);
    throw new SyntaxError(html ? `${path} answered with ${html}` : `invalid JSON in a watch event from ${path}: ${(err as Error).message}`);
  }
  // JSON, but no event ("null", a number): said so, not a TypeError where it is read.
  if (typeof ev !== 'object' || ev === null || Array.isArray(ev)) throw new SyntaxError(`a watch event from ${path} is not an object: ${line.slice(0, 100)}`);
  return ev as RawWatchEvent;
}

/** GET one object as JSON; 404 → undefined. */
export async function getObject(api: ApiConnection, path: string, signal: AbortSignal, headersTimeoutMs: number): Promise<Record<string, any> | undefined> {
  let res: http.IncomingMessage;
  try {
    res = await honouringRetryAfter(signal, () => apiGet(api, path, signal, headersTimeoutMs));
  } catch (err) {
    if (err instanceof ApiStatusError && err.statusCode === 404) return undefined;
    throw err;
  }
  const text = await readText(res, MAX_ANSWER_BYTES, () => tooLarge(res, path));
  try {
    return JSON.parse(text) as Record<string, any>;
  } catch {
    throw new ApiStatusError(res.statusCode ?? 0, notJsonMessage(path, text));
  }
}

export interface ListAllOptions {
  pageSize: number;
  signal: AbortSignal;
  headersTimeoutMs: number;
  /** After each page: objects so far, and the total when the server counts (remainingItemCount). */
  onPage(listed: number, total: number | undefined): void;
  onRestart(listedBefore: number): void;
  /** The server asked to wait this many seconds (Retry-After) before the page is asked for again. */
  onWait?(seconds: number): void;
}

/**
 * A whole LIST, page by page (client-go tools/pager), each page slimmed before the next is asked
 * for: at most one page (500 objects) of raw JSON in memory. A continue token whose snapshot was
 * compacted (410) starts over, at most three times. The resourceVersion is the snapshot's.
 */
export async function listAll<T extends { key: string }>(
  api: ApiConnection,
  path: string,
  slim: (raw: Record<string, any>) => T | undefined,
  o: ListAllOptions,
): Promise<{ items: Map<string, T>; resourceVersion: string }> {
  let items = new Map<string, T>();
  let continueToken: string | undefined;
  let resourceVersion = '';
  let restarts = 0;
  for (;;) {
    let page: ListPage;
    try {
      page = await listPage(
        api,
        path,
        o.pageSize,
        continueToken,
        AbortSignal.any([o.signal, AbortSignal.timeout(PAGE_TIMEOUT_MS)]),
        o.headersTimeoutMs,
        o.onWait,
      );
    } catch (err) {
      if (continueToken && isGone(err) && restarts++ < 3) {
        o.onRestart(items.size);
        items = new Map();
        continueToken = undefined;
        continue;
      }
      throw err;
    }
    for (const raw of page.items) {
      const s = slim(raw);
      if (s) items.set(s.key, s);
    }
    resourceVersion = page.resourceVersion;
    o.onPage(items.size, page.remainingItemCount === undefined ? undefined : items.size + page.remainingItemCount);
    if (!page.continueToken) return { items, resourceVersion };
    // The same page again: a front that drops the parameter would have us ask for it for ever.
    if (page.continueToken === continueToken)
      throw new ApiStatusError(
        200,
        `the LIST of ${path} answered its continue token with the same continue token (does something in front of the API server drop the continue parameter?)`,
      );
    continueToken = page.continueToken;
  }
}

/** How many objects a path lists, from one `limit=1` page; undefined when the server does not say (selectors). */
export async function countObjects(api: ApiConnection, path: string, headersTimeoutMs: number): Promise<number | undefined> {
  const page = await listPage(api, path, 1, undefined, AbortSignal.timeout(PAGE_TIMEOUT_MS), headersTimeoutMs);
  if (page.remainingItemCount !== undefined) return page.items.length + page.remainingItemCount;
  return page.continueToken ? undefined : page.items.length;
}
