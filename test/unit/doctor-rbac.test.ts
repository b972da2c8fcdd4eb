// Which port-forward rights doctor asks for, by the API server's version: the WebSocket upgrade
// every transport uses is a GET; from 1.35 it is also authorized as create.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { portForwardAsks } from '../../src/doctor/cluster.js';

const verbs = (gitVersion: string | undefined) => portForwardAsks(gitVersion).map((a) => a.label);

test('get and create from 1.35, and when the version is unknown', () => {
  for (const v of ['v1.35.0', 'v1.37.2', 'v1.40.0-alpha.1', 'v2.0.0', undefined, 'unknown']) {
    assert.deepEqual(verbs(v), ['get pods/portforward', 'create pods/portforward'], String(v));
  }
});

test('get alone before 1.35 (distribution suffixes included)', () => {
  for (const v of ['v1.34.4', 'v1.30.0+k3s1', 'v1.29.10-eks-123', 'v1.31.1-gke.100']) assert.deepEqual(verbs(v), ['get pods/portforward'], v);
});

test('each ask is the pods resource with the portforward subresource', () => {
  for (const a of portForwardAsks('v1.37.2')) assert.deepEqual([a.resource, a.group, a.subresource], ['pods', '', 'portforward']);
});
