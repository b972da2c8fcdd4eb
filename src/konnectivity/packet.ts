// The konnectivity frontend wire format: the Packet message that apiserver-network-proxy's
// ProxyService.Proxy bidirectional gRPC stream carries both ways. Field numbers and enum values
// follow upstream's konnectivity-client/proto/client/client.proto (so the bytes interoperate);
// the schema text below is our own, and protobufjs does the encoding.
//
// One Proxy stream carries one connection (konnectivity-client/pkg/client/client.go):
//   client → DIAL_REQ {protocol "tcp", address "ip:port", random}
//   server → DIAL_RSP {random, connectID, error}   (error set: the dial failed, stream ends)
//   both   → DATA {connectID, data}
//   client → CLOSE_REQ {connectID}  ·  server → CLOSE_RSP {connectID, error}
//   client → DIAL_CLS {random} gives up a pending dial; server → DIAL_CLS: the dial was dropped.
// DRAIN is agent → server only and never reaches a frontend.
import protobuf from 'protobufjs';

const SCHEMA = `
syntax = "proto3";
// One konnectivity frame. "kind" says which of the payloads is set.
message Packet {
  Kind kind = 1;
  oneof body {
    Dial dial = 2;
    DialAnswer dialAnswer = 3;
    Bytes bytes = 4;
    Close close = 5;
    CloseAnswer closeAnswer = 6;
    DialCancel dialCancel = 7;
    Drain drain = 8;
  }
}
enum Kind {
  DIAL_REQ = 0;
  DIAL_RSP = 1;
  CLOSE_REQ = 2;
  CLOSE_RSP = 3;
  DATA = 4;
  DIAL_CLS = 5;
  DRAIN = 6;
}
message Dial { string protocol = 1; string address = 2; int64 random = 3; }
message DialAnswer { string error = 1; int64 connectID = 2; int64 random = 3; }
message Close { int64 connectID = 1; }
message CloseAnswer { string error = 1; int64 connectID = 2; }
message DialCancel { int64 random = 1; }
message Drain {}
message Bytes { int64 connectID = 1; string error = 2; bytes data = 3; }
`;

const PacketType = protobuf.parse(SCHEMA, { keepCase: true }).root.lookupType('Packet');

/** A decoded packet. Identifiers are int64 on the wire, bigint here. */
export type Packet =
  | { type: 'DIAL_REQ'; protocol: string; address: string; random: bigint }
  | { type: 'DIAL_RSP'; random: bigint; connectID: bigint; error: string }
  | { type: 'DATA'; connectID: bigint; data: Buffer; error: string }
  | { type: 'CLOSE_REQ'; connectID: bigint }
  | { type: 'CLOSE_RSP'; connectID: bigint; error: string }
  | { type: 'DIAL_CLS'; random: bigint }
  | { type: 'DRAIN' }
  /** A kind client.proto does not have (a newer server's): upstream's client passes over it, as we do. */
  | { type: 'UNKNOWN'; kind: string };

export type PacketKind = Packet['type'];

interface WireObject {
  kind?: string;
  dial?: { protocol?: string; address?: string; random?: string };
  dialAnswer?: { error?: string; connectID?: string; random?: string };
  bytes?: { connectID?: string; error?: string; data?: Uint8Array };
  close?: { connectID?: string };
  closeAnswer?: { error?: string; connectID?: string };
  dialCancel?: { random?: string };
}

const id = (v: string | undefined): bigint => BigInt(v ?? '0');

export function encodePacket(p: Packet): Buffer {
  let body: Record<string, unknown>;
  switch (p.type) {
    case 'DIAL_REQ':
      body = { dial: { protocol: p.protocol, address: p.address, random: p.random.toString() } };
      break;
    case 'DIAL_RSP':
      body = { dialAnswer: { error: p.error, connectID: p.connectID.toString(), random: p.random.toString() } };
      break;
    case 'DATA':
      body = { bytes: { connectID: p.connectID.toString(), error: p.error, data: p.data } };
      break;
    case 'CLOSE_REQ':
      body = { close: { connectID: p.connectID.toString() } };
      break;
    case 'CLOSE_RSP':
      body = { closeAnswer: { error: p.error, connectID: p.connectID.toString() } };
      break;
    case 'DIAL_CLS':
      body = { dialCancel: { random: p.random.toString() } };
      break;
    case 'DRAIN':
      body = { drain: {} };
      break;
    case 'UNKNOWN':
      body = {};
      break;
  }
  const message = PacketType.fromObject({ kind: p.type === 'UNKNOWN' ? Number(p.kind) : p.type, ...body });
  const bytes = PacketType.encode(message).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Decodes one packet; throws on bytes that are not a Packet. A kind we do not know is UNKNOWN, not an error (it would end the stream). */
export function decodePacket(buf: Buffer): Packet {
  const o = PacketType.toObject(PacketType.decode(buf), { longs: String, enums: String, defaults: false }) as WireObject;
  const kind = o.kind ?? 'DIAL_REQ'; // proto3 omits the zero value
  switch (kind) {
    case 'DIAL_REQ':
      return { type: kind, protocol: o.dial?.protocol ?? '', address: o.dial?.address ?? '', random: id(o.dial?.random) };
    case 'DIAL_RSP':
      return { type: kind, random: id(o.dialAnswer?.random), connectID: id(o.dialAnswer?.connectID), error: o.dialAnswer?.error ?? '' };
    case 'DATA': {
      const d = o.bytes?.data;
      return {
        type: kind,
        connectID: id(o.bytes?.connectID),
        error: o.bytes?.error ?? '',
        data: d ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.alloc(0),
      };
    }
    case 'CLOSE_REQ':
      return { type: kind, connectID: id(o.close?.connectID) };
    case 'CLOSE_RSP':
      return { type: kind, connectID: id(o.closeAnswer?.connectID), error: o.closeAnswer?.error ?? '' };
    case 'DIAL_CLS':
      return { type: kind, random: id(o.dialCancel?.random) };
    case 'DRAIN':
      return { type: kind };
    default:
      return { type: 'UNKNOWN', kind: String(kind) };
  }
}

/** gRPC method path: upstream's proto has no package, so the service is plain "ProxyService". */
export const PROXY_METHOD = '/ProxyService/Proxy';

/** A dial identifier like upstream's rand.Int63(): positive, never 0. */
export function newDialId(random: (n: number) => Buffer): bigint {
  for (;;) {
    const v = random(8).readBigUInt64BE() & 0x7fff_ffff_ffff_ffffn;
    if (v !== 0n) return v;
  }
}
