// Targets with planted bugs, for testing the fuzzer itself. `selftest` throws behind two nested
// byte comparisons (blind random search needs ~65,000 inputs); `selftest-hang` loops forever on
// "HNG!", which only the runner's watchdog can stop.
import type { FuzzTarget } from '../engine.js';

export const selftestTarget: FuzzTarget = {
  name: 'selftest',
  maxLen: 16,
  dictionary: [],
  include: (url) => url.includes('/targets/selftest.js'),
  run(input) {
    if (input[0] === 0x50) {
      if (input[1] === 0x57) {
        throw new TypeError('planted bug reached');
      }
    }
  },
};

export const selftestHangTarget: FuzzTarget = {
  ...selftestTarget,
  name: 'selftest-hang',
  run(input) {
    if (input.toString('latin1', 0, 4) === 'HNG!') for (;;);
  },
};
