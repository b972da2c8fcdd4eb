// doctor/post-json.ts (the doctor's SelfSubjectAccessReviews) against a hostile API server: an
// answer that never ends is cut at its bound, one that trickles at the request timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { postJson, REVIEW_ANSWER_MAX } from '../../src/doctor/post-json.js';
import type { ApiConnection } from '../../src/cluster/api.js';

async function serve(t: { after(fn: () => void): void }, answer: (res: http.ServerResponse) => void) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { requestOptions: async () => ({ agent: false }), url: (p: string) => new URL(`http://127.0.0.1:${port}${p}`) } as unknown as ApiConnection;
}

const review = { kind: 'SelfSubjectAccessReview' };

test('a 200 whose body goes on without end is refused at its bound, not read into memory', { timeout: 30_000 }, async (t) => {
  const chunk = Buffer.alloc(256 * 1024, 0x20);
  let sent = 0;
  const api = await serve(t, (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    // Stops (without ending) at 32 times the bound: enough to tell, not enough to hurt.
    const pump = (): void => {
      while (!res.destroyed && sent < 32 * REVIEW_ANSWER_MAX && res.write(chunk)) sent += chunk.length;
    };
    res.on('drain', pump);
    pump();
  });
  await assert.rejects(postJson(api, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', review, 10_000), /larger than 8 MiB/);
  assert.ok(sent < 16 * REVIEW_ANSWER_MAX, `${sent} bytes were sent before the answer was refused`);
});

test('a body that trickles for ever ends at the request timeout', { timeout: 20_000 }, async (t) => {
  const api = await serve(t, (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{');
    const drip = setInterval(() => res.write(' '), 50);
    res.on('close', () => clearInterval(drip));
  });
  await assert.rejects(postJson(api, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', review, 1_000), /timed out after 1000 ms/);
});

test('an answer within its bound is read', async (t) => {
  const api = await serve(t, (res) => {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...review, status: { allowed: true } }));
  });
  assert.deepEqual(await postJson(api, '/x', review, 5_000), { ...review, status: { allowed: true } });
});
