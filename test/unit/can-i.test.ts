// The kubectl line a refusal gives to check a right, from the API server's 403 words.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canILine, withCanI } from '../../src/cluster/can-i.js';

const refusal = (verb: string, resource: string, group: string) =>
  `${resource} is forbidden: User "system:serviceaccount:shop:dev" cannot ${verb} resource "${resource}" in API group "${group}" in the namespace "team2"`;

test('core, grouped and sub- resources are spelled as kubectl auth can-i reads them', () => {
  assert.equal(canILine(refusal('watch', 'services', ''), 'team2'), 'kubectl auth can-i watch services -n team2');
  assert.equal(canILine(refusal('list', 'endpointslices', 'discovery.k8s.io'), 'team2'), 'kubectl auth can-i list endpointslices.discovery.k8s.io -n team2');
  assert.equal(canILine(refusal('get', 'pods/portforward', ''), 'team2'), 'kubectl auth can-i get pods --subresource=portforward -n team2');
});

test('words that name no right are left as they are', () => {
  assert.equal(canILine('pods "x" is forbidden: ', 'shop'), undefined);
  assert.equal(withCanI('forbidden', 'shop'), 'forbidden');
  assert.equal(withCanI(refusal('watch', 'services', ''), 'team2'), `${refusal('watch', 'services', '')} (check: kubectl auth can-i watch services -n team2)`);
});
