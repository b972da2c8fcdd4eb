// The managed proxy's own process, started by `connect` (never typed by users): see
// src/managed/daemon.ts.
import { Command, Flags } from '@oclif/core';
import { runDaemon } from '../managed/daemon.js';

export default class Daemon extends Command {
  static override hidden = true;
  static override summary = 'Run a managed proxy (started by connect).';

  static override flags = {
    id: Flags.string({ summary: 'Connection ID whose state to run.', required: true }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Daemon);
    const code = await runDaemon(flags.id);
    this.exit(code);
  }
}
