import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatDuration, parseDuration } from '../../src/core/duration.js';

test('units and bare numbers (seconds)', () => {
  const cases: Array<[string, number]> = [
    ['15s', 15_000],
    ['500ms', 500],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['15', 15_000],
    ['0', 0],
    ['1.5s', 1_500],
    ['.25s', 250],
    ['0.5', 500],
    [' 10s ', 10_000],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, text);
});

test('rejects what it cannot read', () => {
  for (const text of ['', 's', '-1s', '5x', '1e3', '10 s', '1s2', 'Infinity', 'NaN', '5S', '1d']) {
    assert.throws(() => parseDuration(text), /invalid duration/, JSON.stringify(text));
  }
});

test('rejects what setTimeout cannot wait for', () => {
  assert.throws(() => parseDuration('600h'), /too long/);
  assert.equal(parseDuration('596h'), 596 * 3_600_000);
});

test('format is the shortest exact spelling and parses back', () => {
  const cases: Array<[number, string]> = [
    [15_000, '15s'],
    [500, '500ms'],
    [1_500, '1500ms'],
    [120_000, '2m'],
    [90_000, '90s'],
    [0, '0s'],
  ];
  for (const [ms, text] of cases) {
    assert.equal(formatDuration(ms), text);
    assert.equal(parseDuration(text), ms);
  }
});
