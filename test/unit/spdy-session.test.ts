// SPDY session semantics, client and server wired back to back: stream ids, reply, data, FIN
// half-close, RST, PING, GOAWAY (streams it left out end at once; outOfStreams), ignored SETTINGS/WINDOW_UPDATE,
// DATA before SYN_REPLY dropped, stale stream ids refused, unknown control frames fatal, a bound
// on the replies a peer makes us owe.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_QUEUED_REPLIES, SpdyFloodError, SpdySession, type SpdyStream, type SessionHandlers } from '../../src/tunnel/spdy/session.js';
import { HeaderCompressor, encodeHeaderBlock } from '../../src/tunnel/spdy/header-block.js';
import {
  FrameReader,
  MAX_STREAM_ID,
  encodeData,
  encodeGoAway,
  encodePing,
  encodeRawControl,
  encodeSettings,
  encodeSynReply,
  encodeSynStream,
  encodeWindowUpdate,
  type Frame,
} from '../../src/tunnel/spdy/framer.js';

const tick = () => new Promise((r) => setImmediate(r));
async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(pred(), what);
}

/** Two sessions joined by an asynchronous pipe; `raw` records what each side wrote. */
function pair(serverHandlers: SessionHandlers, clientHandlers: SessionHandlers = {}) {
  const raw = { client: [] as Buffer[], server: [] as Buffer[] };
  let client!: SpdySession;
  let server!: SpdySession;
  client = new SpdySession(
    'client',
    {
      write: (b) => {
        raw.client.push(b);
        setImmediate(() => server.receive(b));
      },
      close: () => setImmediate(() => server.destroy()),
    },
    clientHandlers,
  );
  server = new SpdySession(
    'server',
    {
      write: (b) => {
        raw.server.push(b);
        setImmediate(() => client.receive(b));
      },
      close: () => setImmediate(() => client.destroy()),
    },
    serverHandlers,
  );
  return { client, server, raw };
}

function frames(bufs: Buffer[]): Frame[] {
  const r = new FrameReader();
  for (const b of bufs) r.push(b);
  const out: Frame[] = [];
  for (let f = r.next(); f; f = r.next()) out.push(f);
  return out;
}

test('open, reply, data both ways, FIN half-close each way, then the stream is forgotten', async () => {
  const got: string[] = [];
  let serverStream: SpdyStream | undefined;
  const { client, server } = pair({
    onStream(s) {
      serverStream = s;
      got.push(`server saw ${s.id} ${JSON.stringify({ ...s.headers })}`);
      s.reply();
      s.onData = (d) => s.write(Buffer.from(d.toString().toUpperCase()));
      s.onEnd = () => {
        got.push('server saw FIN');
        s.end();
      };
    },
  });
  const s = client.openStream({ streamtype: 'data', port: '80', requestid: '0' });
  assert.equal(s.id, 1);
  let reply = false;
  let echoed = '';
  let ended = false;
  s.onReply = () => (reply = true);
  s.onData = (d) => (echoed += d.toString());
  s.onEnd = () => (ended = true);
  await until(() => reply, 'SYN_REPLY');
  s.write(Buffer.from('hello'));
  await until(() => echoed === 'HELLO', 'echo');
  assert.equal(client.activeStreams, 1);
  s.end();
  await until(() => ended, 'server FIN');
  assert.deepEqual(got, ['server saw 1 {"streamtype":"data","port":"80","requestid":"0"}', 'server saw FIN']);
  assert.equal(client.activeStreams, 0);
  await tick();
  assert.equal(server.activeStreams, 0);
  assert.equal(serverStream?.open, false);
  assert.equal(client.openStream({}).id, 3, 'client ids are odd and increasing');
});

test('DATA that arrives before SYN_REPLY is dropped; RST ends one stream, not the session', async () => {
  const { client, server } = pair({
    onStream(s) {
      s.write(Buffer.from('too early')); // before our reply: the client must drop it
      s.reply();
      s.write(Buffer.from('ok'));
      if (s.headers.kill) s.reset();
    },
  });
  const a = client.openStream({});
  const b = client.openStream({ kill: '1' });
  let aData = '';
  let bReset = 0;
  a.onData = (d) => (aData += d.toString());
  b.onReset = (status) => (bReset = status);
  await until(() => aData === 'ok' && bReset === 5, 'data on a, RST CANCEL on b');
  assert.equal(client.activeStreams, 1);
  assert.equal(server.closed, false);
  a.write(Buffer.from('still fine'));
  a.reset();
  await until(() => server.activeStreams === 0, 'server forgets the reset stream');
});

test('PING: ours come back with a round trip time; the peer echoes; SETTINGS and WINDOW_UPDATE are ignored', async () => {
  const { client, server, raw } = pair({ onStream: (s) => s.reply() });
  const rtt = await client.ping();
  assert.ok(rtt >= 0);
  const serverRtt = await server.ping();
  assert.ok(serverRtt >= 0);
  const pings = frames(raw.client).filter((f) => f.type === 'ping');
  assert.deepEqual(
    pings.map((f) => (f as { id: number }).id),
    [1, 2],
    "client pinged 1, echoed the server's 2",
  );
  client.receive(encodeSettings([{ id: 7, value: 1 }]));
  client.receive(encodeWindowUpdate(1, 1000));
  await tick();
  assert.equal(client.closed, false);
});

test('GOAWAY: no new streams after it, existing ones carry on', async () => {
  let goAway = -1;
  let serverStream: SpdyStream | undefined;
  const { client, server } = pair(
    {
      onStream: (s) => {
        serverStream = s;
        s.reply();
      },
    },
    { onGoAway: (last) => (goAway = last) },
  );
  const s = client.openStream({});
  await until(() => serverStream !== undefined, 'stream');
  server.goAway();
  await until(() => goAway === 1, 'GOAWAY with last good stream 1');
  assert.equal(client.canOpen, false);
  assert.throws(() => client.openStream({}), /going away/);
  let data = '';
  s.onData = (d) => (data += d);
  serverStream!.write(Buffer.from('after goaway'));
  await until(() => data === 'after goaway', 'data after GOAWAY');
});

test('GOAWAY: our streams above lastGoodStreamId that got no reply end at once as unprocessed, without RST; the others carry on', () => {
  const out: Buffer[] = [];
  const client = new SpdySession('client', { write: (b) => out.push(b), close: () => {} });
  const peer = new HeaderCompressor();
  const streams = [1, 3, 5, 7, 9].map(() => client.openStream({}));
  const unprocessed: number[] = [];
  for (const s of streams) s.onUnprocessed = () => unprocessed.push(s.id);
  // The peer replied to 1 and (a peer that contradicts itself) to 9; it names 3 as the last it took.
  client.receive(encodeSynReply(1, peer.compress(encodeHeaderBlock({}))));
  client.receive(encodeSynReply(9, peer.compress(encodeHeaderBlock({}))));
  const before = out.length;
  client.receive(encodeGoAway(3));
  assert.deepEqual(unprocessed, [5, 7], 'synchronously, as the GOAWAY is read');
  assert.equal(client.activeStreams, 3);
  assert.equal(streams[2]!.open, false);
  assert.equal(streams[2]!.write(Buffer.from('x')), false);
  streams[2]!.reset();
  assert.equal(out.length, before, 'nothing sent for streams the peer never took');
  let replied = false;
  streams[1]!.onReply = () => (replied = true);
  client.receive(encodeSynReply(3, peer.compress(encodeHeaderBlock({}))));
  assert.equal(replied, true, 'a stream at lastGoodStreamId still gets its reply');
  assert.deepEqual(unprocessed, [5, 7]);
});

test("outOfStreams: a session that lives on but takes no new streams — the peer's GOAWAY, or the ids ran out — not one that is closed or that we sent GOAWAY on", () => {
  const session = () => new SpdySession('client', { write: () => {}, close: () => {} });
  const peerWent = session();
  assert.equal(peerWent.outOfStreams, false);
  peerWent.receive(encodeGoAway(0));
  assert.equal(peerWent.outOfStreams, true);
  const spent = session();
  (spent as unknown as { nextStreamId: number }).nextStreamId = MAX_STREAM_ID;
  spent.openStream({});
  assert.throws(() => spent.openStream({}));
  assert.equal(spent.outOfStreams, true, 'the last id used');
  const ours = session();
  ours.goAway();
  assert.equal(ours.outOfStreams, false);
  const closed = session();
  closed.receive(encodeGoAway(0));
  closed.destroy();
  assert.equal(closed.outOfStreams, false);
});

test('a SYN_STREAM with a stale id is refused with RST PROTOCOL_ERROR; unknown control frames end the session', async () => {
  const seen: number[] = [];
  let closedWith: Error | undefined;
  const out: Buffer[] = [];
  const server = new SpdySession(
    'server',
    { write: (b) => out.push(b), close: () => {} },
    {
      onStream: (s) => {
        seen.push(s.id);
        s.reply();
      },
      onClose: (err) => (closedWith = err),
    },
  );
  const c = new HeaderCompressor();
  server.receive(encodeSynStream(5, c.compress(encodeHeaderBlock({ a: '1' }))));
  server.receive(encodeSynStream(3, c.compress(encodeHeaderBlock({ a: '2' }))));
  server.receive(encodeSynStream(4, c.compress(encodeHeaderBlock({ a: '3' }))));
  await until(() => frames(out).some((f) => f.type === 'rst_stream' && f.streamId === 4), 'RST for 4');
  assert.deepEqual(seen, [5]);
  assert.deepEqual(
    frames(out)
      .filter((f) => f.type === 'rst_stream')
      .map((f) => [f.streamId, (f as { status: number }).status]),
    [
      [3, 1],
      [4, 1],
    ],
  );
  server.receive(encodeData(5, Buffer.from('x'), false));
  server.receive(encodeSynReply(99, c.compress(encodeHeaderBlock({}))));
  await tick();
  assert.equal(server.closed, false, 'data and replies for unknown/own streams are harmless');
  server.receive(encodeRawControl(10, 0, Buffer.alloc(4)));
  await until(() => server.closed, 'session closed');
  assert.match(String(closedWith), /unknown control frame type 10/);
  assert.ok(
    frames(out).some((f) => f.type === 'goaway' && f.status === 1),
    'GOAWAY PROTOCOL_ERROR before closing',
  );
});

test('destroy() tells every open stream and rejects pending pings', async () => {
  const { client } = pair({ onStream: (s) => s.reply() });
  const s = client.openStream({});
  let told: Error | undefined;
  s.onSessionClose = (err) => (told = err);
  const ping = client.ping();
  client.destroy(new Error('tunnel broke'));
  await assert.rejects(ping, /tunnel broke/);
  assert.match(String(told), /tunnel broke/);
  assert.equal(s.write(Buffer.from('x')), false);
});

test('PINGs a peer never answers do not pile up: past 8 outstanding the oldest is given up', async () => {
  const sent: Buffer[] = [];
  const session = new SpdySession('client', { write: (b) => sent.push(b), close: () => undefined }, {});
  const results = Array.from({ length: 9 }, () =>
    session.ping().then(
      () => 'answered',
      (err: Error) => err.message,
    ),
  );
  assert.equal(await results[0], 'PING not answered', 'the oldest gave way to the ninth');
  assert.equal(sent.length, 9, 'every PING was sent');
  session.destroy();
  for (const r of results.slice(1)) assert.match(await r, /closed/);
});

/** PINGs with the server's (even) ids, as one chunk. */
const peerPings = (n: number, from = 0) => Buffer.concat(Array.from({ length: n }, (_, i) => encodePing(2 * (from + i + 1))));

test('a peer that sends PINGs and never reads the echoes ends the session once 10,000 wait unsent: no more are queued', () => {
  const out: Buffer[] = [];
  let closedWith: Error | undefined;
  // A wire whose bytes never leave (the peer stopped reading): whenSent never calls back.
  const session = new SpdySession('client', { write: (b) => out.push(b), close: () => {}, whenSent: () => {} }, { onClose: (err) => (closedWith = err) });
  session.receive(peerPings(MAX_QUEUED_REPLIES));
  assert.equal(session.closed, false, 'up to the bound every PING is answered');
  session.receive(peerPings(MAX_QUEUED_REPLIES, MAX_QUEUED_REPLIES));
  assert.equal(session.closed, true);
  assert.ok(closedWith instanceof SpdyFloodError, String(closedWith));
  assert.match(closedWith.message, /PINGs .* faster than it read the replies: 10000 replies unsent/);
  const sent = frames(out);
  assert.equal(sent.filter((f) => f.type === 'ping').length, MAX_QUEUED_REPLIES, 'no echo past the bound');
  assert.ok(
    sent.some((f) => f.type === 'goaway' && f.status === 1),
    'GOAWAY PROTOCOL_ERROR',
  );
});

test('a peer that reads its echoes may send any number of PINGs; SYN_STREAMs refused count like PINGs; our own PING still comes back', async () => {
  const out: Buffer[] = [];
  const session = new SpdySession('client', { write: (b) => out.push(b), close: () => {}, whenSent: (cb) => setImmediate(cb) });
  for (let burst = 0; burst < 6; burst++) {
    session.receive(peerPings(MAX_QUEUED_REPLIES / 2, burst * (MAX_QUEUED_REPLIES / 2)));
    await tick();
  }
  assert.equal(session.closed, false);
  assert.equal(frames(out).filter((f) => f.type === 'ping').length, 3 * MAX_QUEUED_REPLIES, 'every PING echoed');
  const rtt = session.ping();
  session.receive(encodePing(1));
  assert.ok((await rtt) >= 0, 'keepalive round trip');

  // A client has no stream handler: each server stream is refused, and those refusals are owed too.
  const c = new HeaderCompressor();
  const stuck = new SpdySession('client', { write: () => {}, close: () => {}, whenSent: () => {} });
  stuck.receive(Buffer.concat(Array.from({ length: MAX_QUEUED_REPLIES }, (_, i) => encodeSynStream(2 * (i + 1), c.compress(encodeHeaderBlock({}))))));
  assert.equal(stuck.closed, false);
  stuck.receive(encodePing(2));
  assert.equal(stuck.closed, true, 'the next reply past the bound ends it');
});

test('header blocks inflate as their frames arrive: a bad block ends the session before its frame is acted on; a throwing stream handler ends the session too', async () => {
  // A SYN_REPLY whose block does not inflate: the stream never hears of a reply.
  const out: Buffer[] = [];
  let closedWith: Error | undefined;
  const client = new SpdySession('client', { write: (b) => out.push(b), close: () => {} }, { onClose: (err) => (closedWith = err) });
  const s = client.openStream({ streamtype: 'data' });
  let replied = false;
  s.onReply = () => (replied = true);
  client.receive(encodeSynReply(s.id, Buffer.from('78bbffffffff0000', 'hex')));
  assert.equal(client.closed, true, 'synchronously: no thread-pool round trip in between');
  assert.equal(replied, false);
  assert.match(String(closedWith), /header block does not decompress/);
  assert.ok(
    frames(out).some((f) => f.type === 'goaway' && f.status === 1),
    'GOAWAY PROTOCOL_ERROR',
  );

  // Several SYN_STREAMs in one chunk are all handled within receive(), in order.
  const seen: string[] = [];
  const server = new SpdySession(
    'server',
    { write: () => {}, close: () => {} },
    {
      onStream: (st) => {
        seen.push(st.headers.n!);
        if (st.headers.n === 'boom') throw new Error('handler bug');
        st.reply();
      },
      onClose: (err) => (closedWith = err),
    },
  );
  const c = new HeaderCompressor();
  server.receive(Buffer.concat([1, 3, 5].map((id) => encodeSynStream(id, c.compress(encodeHeaderBlock({ n: String(id) }))))));
  assert.deepEqual(seen, ['1', '3', '5']);
  server.receive(encodeSynStream(7, c.compress(encodeHeaderBlock({ n: 'boom' }))));
  assert.equal(server.closed, true);
  assert.match(String(closedWith), /handler bug/);
});
