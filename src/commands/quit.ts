// `kubectl proxyout quit`: stop every managed proxy and remove all transient files (logs stay).
import { Command } from '@oclif/core';
import { layout, stateDirExists } from '../state/paths.js';
import { stopAll } from '../managed/stop.js';
import { failAfterStops } from '../cli/managed-errors.js';
import { describeStop } from './disconnect.js';

export default class Quit extends Command {
  static override summary = 'Stop every managed proxy and remove their transient files; logs stay.';
  static override description =
    'The same as `disconnect --all`, and also removes anything else left under the proxies directory. Proxies that run elsewhere (another machine or container that shares this state directory) are left alone.';
  static override examples = ['<%= config.bin %> quit'];

  async run(): Promise<void> {
    await this.parse(Quit);
    const l = layout();
    const stopped = await (async () => (stateDirExists(l) ? stopAll(l, { sweep: true }) : []))().catch((err: unknown) =>
      failAfterStops(this, err, describeStop),
    );
    if (stopped.length === 0) this.log('kubectl-proxyout: no managed proxies');
    for (const s of stopped) this.log(describeStop(s));
  }
}
