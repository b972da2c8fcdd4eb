// `npm run fuzz -- [--target socks|http|spdy|websocket] [--seconds N] [--seed S] [--no-save]`: a longer fuzzing
// session than CI's, which by default adds new coverage-increasing inputs to
// test/fuzz/corpus/<target>/ and then minimises that directory, for committing. Exits 1 on a
// finding (saved there as crash-<hash>).
import { parseArgs } from 'node:util';
import { minimiseCorpus, runFuzzer } from './runner.js';

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true },
    seconds: { type: 'string', default: '60' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    'no-save': { type: 'boolean', default: false },
  },
});

let failed = false;
for (const target of values.target ?? ['socks', 'http']) {
  const r = await runFuzzer({ target, seconds: Number(values.seconds), seed: Number(values.seed), save: !values['no-save'] });
  console.log(
    `${target}: ${r.execs} execs (${r.execsPerSecond}/s), ${r.features} features, corpus ${r.corpusSize}, ${r.newInputs.length} new inputs, seed ${values.seed}`,
  );
  if (r.finding) {
    failed = true;
    console.log(`${target}: FINDING (${r.finding.kind}) saved as ${r.crashFile}\n${r.finding.message}`);
  } else if (!values['no-save']) {
    const m = await minimiseCorpus(target);
    console.log(`${target}: corpus minimised to ${m.kept} inputs (${m.dropped} dropped)`);
  }
}
process.exit(failed ? 1 : 0);
