// The refusal of a port-forward upgrade (403) names the kubectl line that checks the right for the
// pod refused: a Role's resourceNames can grant pods/portforward on some pods only, where
// `kubectl auth can-i … pods --subresource=portforward` (no name) says "no" even for those.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { upgradeForbidden } from '../../src/tunnel/pod-stream.js';
import { NotAllowedError } from '../../src/core/errors.js';

const target = { namespace: 'shop', pod: 'db-1', port: 8080 };

test('the check names the pod and the verb the API server refused', () => {
  const err = upgradeForbidden(
    'port-forward to shop/db-1:8080 refused by the API server (403): pods "db-1" is forbidden: User "dev" cannot get resource "pods/portforward" in API group "" in the namespace "shop"',
    target,
  );
  assert.ok(err instanceof NotAllowedError);
  assert.match(
    err.message,
    /; the proxy needs get and create on pods\/portforward in namespace shop \(check: kubectl auth can-i get pods\/db-1 --subresource=portforward -n shop\)$/,
  );
});

test('a refusal that names no verb (the WebSocket create check) is checked with create', () => {
  const err = upgradeForbidden('port-forward to shop/db-1:8080 refused by the API server (403): pods "db-1" is forbidden: ', target);
  assert.match(err.message, /pods "db-1" is forbidden; the proxy needs .* \(check: kubectl auth can-i create pods\/db-1 --subresource=portforward -n shop\)$/);
});
