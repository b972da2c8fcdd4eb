// What the conformance tests compare of an API server's answers (test/helpers/wire-probe.ts reads
// them): each normalised for what differs by nature between two clusters — users' names, UIDs,
// resourceVersions, sandbox IDs, slice name suffixes, continue tokens, the Go decoder's words.
import assert from 'node:assert/strict';
import type { WsSession } from './wire-probe.js';

export function normText(s: string): string {
  return (
    s
      .replace(/User "[^"]*"/g, 'User "<user>"')
      .replace(/\b[0-9a-f]{64}\b/g, '<sandbox>')
      .replace(/"\/var\/run\/netns\/[^"]*"/g, '"<netns>"')
      .replace(/too old resource version: \d+ \(\d+\)/g, 'too old resource version: <rv> (<rv>)')
      .replace(/\(conn=&\{[^)]*\), request=\d+\)/g, '(conn=<conn>, request=<n>)')
      .replace(/127\.0\.0\.1:\d+->/g, '127.0.0.1:<port>->')
      // Go's decoders word their errors by the bytes they met; the proxy reads only the status.
      .replace(/continue key is not valid: .*/, 'continue key is not valid: <why>')
  );
}

/** Every string in a parsed JSON value, normalised. */
export function normJson(v: unknown): unknown {
  if (typeof v === 'string') return normText(v);
  if (Array.isArray(v)) return v.map(normJson);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normJson(x)]));
  return v;
}

/** The status, the media type and the body (a Status object normalised, or text). */
export function answerShape(a: { status: number; headers: Record<string, unknown>; body: string }): unknown {
  const type = String(a.headers['content-type'] ?? '').split(';')[0];
  let body: unknown = normText(a.body);
  if (type === 'application/json') {
    const o = JSON.parse(a.body) as Record<string, unknown>;
    // A Status's continue token (a 410 for a compacted one offers another) is opaque.
    if (o.kind === 'Status' && (o.metadata as { continue?: string } | undefined)?.continue) o.metadata = { continue: '<token>' };
    body = o.kind === 'Status' ? normJson(o) : `(${String(o.kind)})`;
  }
  return { status: a.status, type, body };
}

export const sorted = <T>(xs: T[]): T[] => [...xs].sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));

/** An EndpointSlice as the proxy reads it (slim.ts), names and addresses left out. */
export function sliceShape(s: any): unknown {
  return {
    addressType: s.addressType,
    labels: Object.keys(s.metadata.labels ?? {}).sort(),
    ownerKinds: (s.metadata.ownerReferences ?? []).map((o: any) => o.kind),
    ports: s.ports === null ? null : sorted((s.ports ?? []).map((p: any) => ({ name: p.name, port: p.port, protocol: p.protocol }))),
    endpoints:
      s.endpoints === null
        ? null
        : sorted(
            (s.endpoints ?? []).map((e: any) => ({
              addresses: e.addresses.length,
              conditions: e.conditions,
              hostname: e.hostname,
              targetRef: e.targetRef && { kind: e.targetRef.kind, name: e.targetRef.name, namespace: e.targetRef.namespace, uid: typeof e.targetRef.uid },
              nodeName: typeof e.nodeName,
            })),
          ),
  };
}

/** A watch event: its type, the object's name, or for bookmarks and errors their whole shape. */
export function eventShape(e: { type: string; object: any }): unknown {
  if (e.type === 'ERROR') return { type: e.type, object: normJson(e.object) };
  if (e.type === 'BOOKMARK') {
    const o = structuredClone(e.object);
    o.metadata.resourceVersion = typeof o.metadata.resourceVersion;
    return { type: e.type, object: o };
  }
  const name = e.object.metadata.name as string;
  return { type: e.type, name: e.object.kind === 'EndpointSlice' || e.object.addressType ? name.replace(/-[a-z0-9]{5}$/, '-<suffix>') : name };
}

/** The handshake of a WebSocket upgrade: status, the chosen subprotocol (header as sent), a refusal's body. */
export function handshakeShape(ws: WsSession): unknown {
  const proto = ws.headers['sec-websocket-protocol'];
  return ws.status === 101 ? { status: 101, protocol: proto ?? '(no header)' } : answerShape(ws);
}

/** Every frame of a port-forward WebSocket: channel and payload (the 2-byte port prefixes as numbers). */
export function v4Frames(ws: WsSession): unknown[] {
  return ws.frames.map((f) => {
    if (f.opcode === 8) return { close: f.payload.length >= 2 ? f.payload.readUInt16BE(0) : undefined };
    if (f.opcode !== 2) return { opcode: f.opcode };
    const channel = f.payload[0]!;
    const data = f.payload.subarray(1);
    return data.length === 2 && !/^[\x20-\x7e]{2}$/.test(data.toString('latin1'))
      ? { channel, port: data.readUInt16LE(0) }
      : { channel, text: normText(data.toString('utf8')) };
  });
}

/** The same probe on both sides at once; the normalised answers must be equal (SIMDIFF_DUMP=1 prints both). */
export async function sameOnBoth<S>(sim: S, real: S, probe: (side: S) => Promise<unknown>): Promise<void> {
  const [s, r] = await Promise.all([probe(sim), probe(real)]);
  if (process.env.SIMDIFF_DUMP) console.log(JSON.stringify({ sim: s, real: r }, null, 1));
  assert.deepEqual(s, r);
}
