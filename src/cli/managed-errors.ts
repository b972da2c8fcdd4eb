// Expected failures of the managed-proxy commands (bad kubeconfig, API down, port taken, unknown
// ID, a proxy that runs elsewhere, unsafe state directory) are one `Error: …` line and exit 1,
// like the foreground proxy's.
import type { Command } from '@oclif/core';
import { StartupError } from '../core/errors.js';
import { StateDirError } from '../state/paths.js';
import { PartlyStoppedError, UnknownIdError, type Stopped } from '../managed/stop.js';
import { ElsewhereError } from '../managed/registry.js';
import { NewerEntryError } from '../managed/store.js';

export function failOnKnownError(command: Command, err: unknown): never {
  if (
    err instanceof StartupError ||
    err instanceof StateDirError ||
    err instanceof UnknownIdError ||
    err instanceof ElsewhereError ||
    err instanceof NewerEntryError
  ) {
    command.error(err.message, { exit: 1 });
  }
  throw err;
}

/** As failOnKnownError; a stop of every proxy that left one running first says what it did stop. */
export function failAfterStops(command: Command, err: unknown, describe: (s: Stopped) => string): never {
  if (!(err instanceof PartlyStoppedError)) return failOnKnownError(command, err);
  for (const s of err.stopped) command.log(describe(s));
  return failOnKnownError(command, err.reason);
}
