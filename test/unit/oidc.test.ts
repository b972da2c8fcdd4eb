import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jwtExpiry, OidcTokenSource } from '../../src/cluster/oidc.js';

const jwt = (payload: object) => `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.sig`;

test('jwtExpiry reads exp; anything unreadable counts as expired (0)', () => {
  assert.equal(jwtExpiry(jwt({ exp: 1_900_000_000 })), 1_900_000_000);
  for (const bad of ['', 'abc', 'a.b.c', jwt({ exp: 'soon' }), jwt({})]) assert.equal(jwtExpiry(bad), 0, bad);
});

test('a fresh token is returned without a refresh; without refresh settings an expired one is passed on for the API server to judge', async () => {
  const fresh = jwt({ exp: Math.floor(Date.now() / 1000) + 600 });
  assert.equal(await new OidcTokenSource({ 'id-token': fresh }).token(), fresh);
  const stale = jwt({ exp: Math.floor(Date.now() / 1000) - 1 });
  assert.equal(await new OidcTokenSource({ 'id-token': stale, 'client-id': 'x' }).token(), stale);
});
