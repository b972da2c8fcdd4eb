// Coverage-guided fuzzing in CI, bounded: each target replays its corpus (test/fuzz/corpus/<target>/,
// crashers included, so every finding ever saved is a regression test), then fuzzes for a few
// seconds from a fixed seed. A finding fails the test and is saved to the corpus as crash-<hash>.
// FUZZ_SECONDS and FUZZ_SEED override the budget and the seed; `npm run fuzz` runs longer
// sessions that grow the corpus. The engine is tested on a target with planted bugs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadCorpus, corpusDir, runFuzzer } from './runner.js';

const SECONDS = Number(process.env.FUZZ_SECONDS ?? 2);
const SEED = Number(process.env.FUZZ_SEED ?? 20261126);

for (const target of ['socks', 'http', 'spdy', 'websocket']) {
  test(`${target}: the corpus replays clean, then ${SECONDS} s of fuzzing find nothing`, async (t) => {
    const corpus = loadCorpus(corpusDir(target)).length;
    assert.ok(corpus > 0, `a corpus for ${target}`);
    const r = await runFuzzer({ target, seconds: SECONDS, seed: SEED });
    t.diagnostic(
      `${target}: ${r.execs} execs (${r.execsPerSecond}/s), ${r.features} coverage features, corpus ${corpus} + ${r.newInputs.length} new, seed ${SEED}`,
    );
    assert.equal(r.finding, undefined, r.finding && `${r.finding.kind}, saved as ${r.crashFile} (now a regression test):\n${r.finding.message}`);
    assert.ok(r.execs > corpus, 'it fuzzed beyond the corpus');
  });
}

test('the engine finds a bug behind nested comparisons, saves it, replays it; the watchdog catches a hang', async (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'proxyout-fuzz-selftest-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  // Deterministic (a pure target, seeded mutations). Seeds 1–16 all find it within 5,000 execs
  // (this one in about 300) thanks to coverage feedback and the literals in the dictionary;
  // blind random search would need ~65,000.
  const found = await runFuzzer({ target: 'selftest', seconds: 30, maxExecs: 20_000, seed: 16, corpusRoot: root });
  assert.equal(found.finding?.kind, 'exception', `found within ${found.execs} execs`);
  assert.match(found.finding!.message, /planted bug reached/);
  assert.ok(found.crashFile && existsSync(found.crashFile));
  assert.equal(readFileSync(found.crashFile).toString('latin1', 0, 2), 'PW');

  const replay = await runFuzzer({ target: 'selftest', seconds: 0, corpusRoot: root });
  assert.equal(replay.finding?.kind, 'exception', 'the saved crasher fails the replay');
  assert.equal(replay.execs, 1);

  const hangRoot = path.join(root, 'hang');
  mkdirSync(path.join(hangRoot, 'selftest-hang'), { recursive: true });
  writeFileSync(path.join(hangRoot, 'selftest-hang', 'seed-hang'), 'HNG!');
  const hang = await runFuzzer({ target: 'selftest-hang', seconds: 0, corpusRoot: hangRoot, hangMs: 1000 });
  assert.equal(hang.finding?.kind, 'hang');
  assert.equal(hang.finding.input.toString(), 'HNG!');
});
