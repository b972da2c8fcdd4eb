// `kubectl proxyout logs ID [-f] [--json]`: a managed proxy's log, also after it stopped.
import { existsSync } from 'node:fs';
import { Args, Command, Flags } from '@oclif/core';
import { EXEC_LOG_ID, layout, stateDirExists, validateId } from '../state/paths.js';
import { withStateLock } from '../state/lock.js';
import { inspect } from '../managed/registry.js';
import { formatLogLine, rawLogLine, streamLog } from '../managed/logs.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { StateDirError } from '../state/paths.js';

export default class Logs extends Command {
  static override summary = "Print or follow a managed proxy's log (kept after it stops).";
  static override description = [
    'One line per event: time, level, message and its fields (stream open/close with target, pod,',
    'bytes and duration; failures with their reason). --json prints the raw JSON lines. With -f it',
    'keeps printing new lines until the proxy stops or you press Ctrl-C.',
  ].join(' ');
  static override usage = 'logs ID [-f] [--json]';
  static override examples = ['<%= config.bin %> logs a1b2c3d4', '<%= config.bin %> logs a1b2c3d4 -f --json'];

  static override args = {
    id: Args.string({ description: 'Connection ID (see `status`).', required: true, ignoreStdin: true }),
  };

  static override flags = {
    follow: Flags.boolean({ char: 'f', summary: 'Keep printing new lines until the proxy stops.' }),
    json: Flags.boolean({ summary: 'Print the raw JSON lines.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Logs);
    const l = layout();
    const file = await (async () => {
      const id = validateId(args.id);
      const path = l.logFile(id);
      if (!stateDirExists(l) || !existsSync(path)) throw new StateDirError(`no log for ID ${id} (see kubectl proxyout status)`);
      return path;
    })().catch((err: unknown) => failOnKnownError(this, err));

    const abort = new AbortController();
    const onSignal = () => abort.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    // A reader that has gone (`logs -f ID | grep -m1 …`): oclif swallows stdout's EPIPE, so
    // without this the follow went on for good and the pipeline never ended.
    const onStdoutError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') abort.abort();
    };
    process.stdout.on('error', onStdoutError);
    const isDone = async () => {
      // exec's log has no proxy of its own to end with (one run after another writes to it):
      // followed until Ctrl-C, as tail -f.
      if (args.id === EXEC_LOG_ID) return false;
      const found = await withStateLock(l, () => inspect(l, args.id)).catch(() => undefined);
      return !found || found.state === 'dead';
    };
    try {
      // Every exec writes its temporary proxy's lines to one log: its pid tells them apart.
      const withPid = args.id === EXEC_LOG_ID;
      await streamLog(file, (line) => this.log(flags.json ? rawLogLine(line) : formatLogLine(line, withPid)), {
        follow: flags.follow,
        isDone,
        signal: abort.signal,
      });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.stdout.off('error', onStdoutError);
    }
  }
}
