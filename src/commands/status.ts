// `kubectl proxyout status [ID]`: the managed proxies and their live figures.
import { Args, Command, Flags } from '@oclif/core';
import { layout, validateId } from '../state/paths.js';
import { collectStatus } from '../managed/status.js';
import { statusTable } from '../cli/status-table.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { jsonList, printJson } from '../cli/json-output.js';

export default class Status extends Command {
  static override summary = 'Show the managed proxies: state, addresses, uptime, streams, bytes, cache.';
  static override description = [
    'Live figures come from each daemon over its private control socket. A proxy whose daemon is',
    'gone shows as dead (its credentials are removed at once); `disconnect ID` removes the record.',
    'UP is bytes from clients into the cluster, DOWN bytes back to the clients.',
  ].join(' ');
  static override usage = 'status [ID] [--json]';
  static override examples = ['<%= config.bin %> status', '<%= config.bin %> status a1b2c3d4 --json'];

  static override args = {
    id: Args.string({ description: 'Only this connection ID.', required: false, ignoreStdin: true }),
  };

  static override flags = {
    json: Flags.boolean({ summary: 'Print JSON: a ProxyStatusList ({apiVersion, kind, items}), also when ID is given.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Status);
    const rows = await (async () => collectStatus(layout(), args.id === undefined ? undefined : validateId(args.id)))().catch((err: unknown) =>
      failOnKnownError(this, err),
    );
    if (flags.json) this.log(printJson(jsonList('ProxyStatusList', rows)));
    else this.log(statusTable(rows, this.config.version).join('\n'));
  }
}
