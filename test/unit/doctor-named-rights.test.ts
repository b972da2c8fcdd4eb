// Pod names a Role's resourceNames grant pods/portforward on, from a SelfSubjectRulesReview.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { namedGrants } from '../../src/doctor/named-rights.js';

const pf = (verbs: string[], resourceNames: string[], resources = ['pods/portforward']) => ({ verbs, apiGroups: [''], resources, resourceNames });

test('the names every needed verb is granted on, across rules', () => {
  const rules = [pf(['get', 'create'], ['db-0', 'db-2']), pf(['get'], ['db-1']), pf(['create'], ['db-1'])];
  assert.deepEqual(namedGrants(rules, 'pods/portforward', ['get', 'create']), ['db-0', 'db-1', 'db-2']);
});

test('a name with one verb only is not enough; other resources and groups do not count', () => {
  const rules = [
    pf(['get'], ['db-0']),
    { verbs: ['get', 'create'], apiGroups: ['apps'], resources: ['pods/portforward'], resourceNames: ['db-3'] },
    pf(['get', 'create'], ['db-4'], ['pods']),
    pf(['*'], ['db-5'], ['pods/*']),
  ];
  assert.deepEqual(namedGrants(rules, 'pods/portforward', ['get', 'create']), ['db-5']);
  assert.deepEqual(namedGrants(rules, 'pods/portforward', ['get']), ['db-0', 'db-5']);
});
