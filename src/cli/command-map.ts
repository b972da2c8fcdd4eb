// Every command class by id, for the single-file bundle (scripts/package.mjs), where oclif cannot
// import command files from a directory. The npm install keeps oclif's directory discovery and
// the committed manifest, so `--help` there loads no command module at all.
// test/unit/command-map.test.ts checks this list against src/commands/.
import Connect from '../commands/connect.js';
import Daemon from '../commands/daemon.js';
import Disconnect from '../commands/disconnect.js';
import Doctor from '../commands/doctor.js';
import Logs from '../commands/logs.js';
import Quit from '../commands/quit.js';
import Serve from '../commands/serve.js';
import ServiceInstall from '../commands/service-install.js';
import ServiceUninstall from '../commands/service-uninstall.js';
import Status from '../commands/status.js';

export const COMMANDS = {
  connect: Connect,
  daemon: Daemon,
  disconnect: Disconnect,
  doctor: Doctor,
  logs: Logs,
  quit: Quit,
  serve: Serve,
  'service-install': ServiceInstall,
  'service-uninstall': ServiceUninstall,
  status: Status,
};
