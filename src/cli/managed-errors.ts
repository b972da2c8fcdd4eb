// Expected failures of the managed-proxy commands (bad kubeconfig, API down, port taken, unknown
// ID, a proxy that runs elsewhere, unsafe state directory) are one `Error: …` line and exit 1,
// like the foreground proxy's.
import type { Command } from '@oclif/core';
import { StartupError } from '../core/errors.js';
import { StateDirError } from '../state/paths.js';
import { UnknownIdError } from '../managed/stop.js';
import { ElsewhereError } from '../managed/registry.js';

export function failOnKnownError(command: Command, err: unknown): never {
  if (err instanceof StartupError || err instanceof StateDirError || err instanceof UnknownIdError || err instanceof ElsewhereError) {
    command.error(err.message, { exit: 1 });
  }
  throw err;
}
