// A target with planted bugs, for testing the fuzzer itself: the exception sits behind three
// nested byte comparisons (about 2^24 inputs for blind random search, a few thousand with
// coverage feedback), and "HNG!" loops forever (only the watchdog can stop it).
import type { FuzzTarget } from '../engine.js';

export const selftestTarget: FuzzTarget = {
  name: 'selftest',
  maxLen: 16,
  dictionary: [],
  include: (url) => url.includes('/targets/selftest.js'),
  run(input) {
    if (input.toString('latin1', 0, 4) === 'HNG!') for (;;);
    if (input[0] === 0x50) {
      if (input[1] === 0x57) {
        throw new TypeError('planted bug reached');
      }
    }
  },
};
