// Every command by id, loaded on demand, for the single-file bundle (scripts/package.mjs), where
// oclif cannot import command files from a directory: the bundle gives oclif the committed
// manifest (help and command lookup need no command module) and answers its request for command
// `id` from here, so `--help` or `status` evaluates only what that command needs. The npm
// package's clone (dist/src) keeps oclif's directory discovery.
// test/unit/command-map.test.ts checks this list against src/commands/.
import type { Command } from '@oclif/core';

type CommandModule = { default: Command.Class };

export const COMMAND_LOADERS: Record<string, () => Promise<CommandModule>> = {
  connect: () => import('../commands/connect.js'),
  daemon: () => import('../commands/daemon.js'),
  disconnect: () => import('../commands/disconnect.js'),
  doctor: () => import('../commands/doctor.js'),
  exec: () => import('../commands/exec.js'),
  logs: () => import('../commands/logs.js'),
  pac: () => import('../commands/pac.js'),
  quit: () => import('../commands/quit.js'),
  reload: () => import('../commands/reload.js'),
  serve: () => import('../commands/serve.js'),
  'service-install': () => import('../commands/service-install.js'),
  'service-uninstall': () => import('../commands/service-uninstall.js'),
  status: () => import('../commands/status.js'),
  ui: () => import('../commands/ui.js'),
};
