// `kubectl proxyout disconnect ID` / `--all`: stop managed proxies (see src/managed/stop.ts).
import { Args, Command, Flags } from '@oclif/core';
import { layout, stateDirExists, validateId } from '../state/paths.js';
import { stopAll, stopProxy, UnknownIdError, type Stopped } from '../managed/stop.js';
import { failAfterStops } from '../cli/managed-errors.js';
import { whereItRuns } from '../managed/registry.js';
import { describeTarget } from '../managed/store.js';

export default class Disconnect extends Command {
  static override summary = 'Stop a managed proxy (or all of them); its log is kept.';
  static override description = [
    'Checks that the recorded pid still is our daemon, sends SIGTERM so open streams can finish,',
    'and SIGKILL if it has not exited after its drain time (5 s by default). Removes its state and',
    'its private kubeconfig; `logs ID` still shows its log. A proxy that runs elsewhere (another',
    'machine or container that shares this state directory) cannot be stopped from here: run the',
    'command there, or drop its record here with --forget (it then stops by itself).',
  ].join(' ');
  static override usage = ['disconnect ID', 'disconnect --all', 'disconnect ID --forget'];
  static override examples = ['<%= config.bin %> disconnect a1b2c3d4', '<%= config.bin %> disconnect --all'];

  static override args = {
    id: Args.string({ description: 'Connection ID (see `status`).', required: false, ignoreStdin: true }),
  };

  static override flags = {
    all: Flags.boolean({ summary: 'Stop every managed proxy that runs here.' }),
    forget: Flags.boolean({
      summary: 'Drop proxies that run elsewhere from this state directory, without signalling them.',
      description:
        'One that still runs there stops by itself within seconds once it sees its record gone, as every daemon whose record is removed. Proxies that run here are stopped as usual.',
    }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Disconnect);
    if (flags.all && args.id !== undefined) this.error('give a connection ID or --all, not both', { exit: 2 });
    if (!flags.all && args.id === undefined) this.error('give a connection ID (see kubectl proxyout status) or --all', { exit: 2 });
    const l = layout();
    const stopped = await (async (): Promise<Stopped[]> => {
      if (args.id !== undefined) {
        const id = validateId(args.id);
        if (!stateDirExists(l)) throw new UnknownIdError(id);
        return [await stopProxy(l, id, { forget: flags.forget })];
      }
      return stateDirExists(l) ? stopAll(l, { forget: flags.forget }) : [];
    })().catch((err: unknown) => failAfterStops(this, err, describeStop));
    if (stopped.length === 0) this.log('kubectl-proxyout: no managed proxies');
    for (const s of stopped) this.log(describeStop(s));
  }
}

export function describeStop({ id, entry, outcome }: Stopped): string {
  const where = `(${describeTarget(entry)})`;
  if (outcome === 'forgotten')
    return `kubectl-proxyout: forgot ${id} ${where}; it runs elsewhere (${whereItRuns(entry)}), was not signalled, and stops there within seconds if it still runs`;
  if (outcome === 'left-elsewhere')
    return `kubectl-proxyout: left ${id} ${where} alone: it runs elsewhere (${whereItRuns(entry)}); disconnect it there, or forget it here with --forget`;
  if (outcome === 'was-dead') return `kubectl-proxyout: ${id} ${where} was not running; removed its state`;
  if (outcome === 'killed') return `kubectl-proxyout: disconnected ${id} ${where}: it did not exit in time and was killed`;
  return `kubectl-proxyout: disconnected ${id} ${where}`;
}
