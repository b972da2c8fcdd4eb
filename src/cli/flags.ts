// Flag definitions shared by the foreground proxy (`serve`) and `connect`, so both parse and
// document them the same way.
import { Errors, Flags } from '@oclif/core';
import { formatDuration, parseDuration } from './duration.js';

// A string flag, not a custom<number>: its default then shows as "15s" from the static
// manifest, where a computed defaultHelp would make oclif import this module (and the whole
// proxy core) just to print help.
export function durationFlag(summary: string, defaultMs: number, allowZero: boolean) {
  return Flags.string({
    summary,
    helpValue: '<duration>',
    default: formatDuration(defaultMs),
    async parse(input) {
      // A CLIError is a usage error to main.ts: one line, exit 2, no stack.
      let ms: number;
      try {
        ms = parseDuration(input);
      } catch (err) {
        throw new Errors.CLIError(err instanceof Error ? err.message : String(err), { exit: 2 });
      }
      if (ms === 0 && !allowZero) throw new Errors.CLIError('must be greater than 0', { exit: 2 });
      return input;
    },
  });
}

