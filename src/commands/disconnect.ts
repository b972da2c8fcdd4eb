// `kubectl proxyout disconnect ID` / `--all`: stop managed proxies (see src/managed/stop.ts).
import { Args, Command, Flags } from '@oclif/core';
import { layout, stateDirExists, validateId } from '../state/paths.js';
import { stopAll, stopProxy, UnknownIdError, type Stopped } from '../managed/stop.js';
import { failOnKnownError } from '../cli/managed-errors.js';

export default class Disconnect extends Command {
  static override summary = 'Stop a managed proxy (or all of them); its log is kept.';
  static override description = [
    'Checks that the recorded pid still is our daemon, sends SIGTERM so open streams can finish,',
    'and SIGKILL if it has not exited after its drain time (5 s by default). Removes its state and',
    'its private kubeconfig; `logs ID` still shows its log.',
  ].join(' ');
  static override usage = ['disconnect ID', 'disconnect --all'];
  static override examples = ['<%= config.bin %> disconnect a1b2c3d4', '<%= config.bin %> disconnect --all'];

  static override args = {
    id: Args.string({ description: 'Connection ID (see `status`).', required: false, ignoreStdin: true }),
  };

  static override flags = {
    all: Flags.boolean({ summary: 'Stop every managed proxy.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Disconnect);
    if (Boolean(flags.all) === (args.id !== undefined)) this.error('give a connection ID or --all (not both)', { exit: 2 });
    const l = layout();
    const stopped = await (async (): Promise<Stopped[]> => {
      if (args.id !== undefined) {
        const id = validateId(args.id);
        if (!stateDirExists(l)) throw new UnknownIdError(id);
        return [await stopProxy(l, id)];
      }
      return stateDirExists(l) ? stopAll(l) : [];
    })().catch((err: unknown) => failOnKnownError(this, err));
    if (stopped.length === 0) this.log('kubectl-proxyout: no managed proxies');
    for (const s of stopped) this.log(describeStop(s));
  }
}

export function describeStop({ id, entry, outcome }: Stopped): string {
  const where = `(context ${entry.context}, namespace ${entry.namespace})`;
  if (outcome === 'was-dead') return `kubectl-proxyout: ${id} ${where} was not running; removed its state`;
  if (outcome === 'killed') return `kubectl-proxyout: disconnected ${id} ${where}: it did not exit in time and was killed`;
  return `kubectl-proxyout: disconnected ${id} ${where}`;
}
