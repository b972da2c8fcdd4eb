import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Flags, Parser } from '@oclif/core';
import { tableFlagDefinitions, tableFlagsFrom } from '../../src/cli/table-flags.js';

const flags = { ...tableFlagDefinitions(), 'cluster-domain': Flags.string({ default: 'cluster.local' }) };
const parse = async (argv: string[]) => (await Parser.parse(argv, { flags, strict: true })).flags;

test('repeatable --context in order, --direct / --no-direct / neither', async () => {
  assert.deepEqual(tableFlagsFrom(await parse(['--context', 'prod', '--context', 'staging', '--direct'])), {
    config: undefined,
    contexts: ['prod', 'staging'],
    direct: true,
    clusterDomain: 'cluster.local',
    currentContext: undefined,
    extraCA: undefined,
  });
  assert.equal(tableFlagsFrom(await parse(['--no-direct'])).direct, false);
  const none = tableFlagsFrom(await parse(['--config', 'x.yaml']), 'kind-kind');
  assert.deepEqual([none.config, none.contexts, none.direct, none.currentContext], ['x.yaml', [], undefined, 'kind-kind']);
  // Each value needs its own --context: a stray argument is an error, not a second context.
  await assert.rejects(parse(['--context', 'a', 'b']), /Unexpected argument: b/);
});

test('--extra-ca is passed on as the table flag extraCA', async () => {
  assert.equal(tableFlagsFrom(await parse(['--extra-ca', 'corp-ca.pem'])).extraCA, 'corp-ca.pem');
});
