// LIST paging and the streaming writes of big responses.
// - limit + continue as the etcd3 store serves them (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go
//   GetList): every page reads the snapshot of the first one (its resourceVersion), a continue token
//   whose snapshot was compacted is 410 Expired carrying an "inconsistent" token (resourceVersion -1:
//   the rest of the list as it is now, from the next key), remainingItemCount only without selectors.
// - The snapshot is the list of stored objects at the first page (they are never changed in place),
//   kept a few minutes, as etcd keeps a revision until compaction.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { KObject } from './store.js';
import { ApiError, badRequest } from './status.js';

const SNAPSHOT_TTL_MS = 5 * 60_000;
const MAX_SNAPSHOTS = 64;

interface Snapshot {
  rv: number;
  items: readonly KObject[];
  expires: number;
}

export interface ContinueToken {
  /** -1: an inconsistent continuation (the current objects from `key` on). */
  rv: number;
  /** Index of the next item in the snapshot. */
  start: number;
  id: string;
  /** The next item's namespace/name, as upstream's start key. */
  key: string;
}

export class ListSnapshots {
  private readonly map = new Map<string, Snapshot>();

  open(rv: number, items: readonly KObject[]): string {
    const now = Date.now();
    for (const [id, s] of this.map) if (s.expires <= now || this.map.size >= MAX_SNAPSHOTS) this.map.delete(id);
    const id = randomUUID();
    this.map.set(id, { rv, items, expires: now + SNAPSHOT_TTL_MS });
    return id;
  }

  get(id: string): readonly KObject[] | undefined {
    const s = this.map.get(id);
    return s && s.expires > Date.now() ? s.items : undefined;
  }

  /** Extension: forget every snapshot (their continue tokens then get 410). */
  clear(): void {
    this.map.clear();
  }
}

/** Same shape as the apiserver's (base64 of {"v":"meta.k8s.io/v1","rv":…,"start":key}), plus our snapshot id and index. */
export function encodeContinue(t: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: t.rv, start: t.key, i: t.start, id: t.id })).toString('base64url');
}

/** A token the server cannot read: 400, worded as staging/src/k8s.io/apiserver/pkg/storage/continue.go DecodeContinue (the decoder's own words after the colon). */
function invalidToken(why: string): ApiError {
  return badRequest(`invalid continue token: continue key is not valid: ${why}`);
}

export function decodeContinue(token: string): ContinueToken {
  const bad = /[^A-Za-z0-9_-]/.exec(token);
  if (bad) throw invalidToken(`illegal base64 data at input byte ${bad.index}`);
  let t: { v?: unknown; rv?: unknown; start?: unknown; i?: unknown; id?: unknown };
  try {
    t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as typeof t;
  } catch (err) {
    throw invalidToken((err as Error).message);
  }
  if (t?.v !== 'meta.k8s.io/v1') throw invalidToken(`server does not recognize this encoded version ${String(t?.v)}`);
  if (typeof t.rv !== 'number' || t.rv === 0) throw invalidToken('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (typeof t.start !== 'string' || !t.start) throw invalidToken('encoded start key empty (version meta.k8s.io/v1)');
  if (typeof t.i !== 'number' || typeof t.id !== 'string') throw invalidToken('not a token of this server');
  return { rv: t.rv, start: t.i, id: t.id, key: t.start };
}

/**
 * 410 for a continue token whose snapshot is gone, with a token that lists the rest as it is now
 * (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go, the compacted-continue case).
 */
export function continueExpired(next: ContinueToken): ApiError {
  return new ApiError(
    410,
    'Expired',
    'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.',
    undefined,
    { continue: encodeContinue({ ...next, rv: -1, id: '-' }) },
  );
}

/** An exact LIST at a resourceVersion older than what is kept. */
export function listTooOld(): ApiError {
  return new ApiError(410, 'Expired', 'The resourceVersion for the provided list is too old.');
}

/** `limit`: absent or 0 = everything; a negative or non-numeric one is a 400 as upstream. */
export function parseLimit(v: string | null): number {
  if (v === null || v === '') return 0;
  if (!/^-?\d+$/.test(v)) throw badRequest(`strconv.ParseInt: parsing "${v}": invalid syntax`);
  return Math.max(0, Number(v));
}

/**
 * Writes the parts in batches of ~256 KiB and waits for the socket to drain between them, so a
 * 500 MB list or a watch-list's initial events never sit in memory as one string or one queue.
 */
export async function writeParts(res: ServerResponse, parts: Iterable<string>): Promise<boolean> {
  let batch: string[] = [];
  let size = 0;
  const flush = async (): Promise<boolean> => {
    if (res.destroyed || res.writableEnded) return false;
    const ok = res.write(batch.join(''));
    batch = [];
    size = 0;
    if (!ok)
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    return !res.destroyed;
  };
  for (const p of parts) {
    batch.push(p);
    size += p.length;
    if (size >= 256 * 1024 && !(await flush())) return false;
  }
  return batch.length ? flush() : !res.destroyed;
}
