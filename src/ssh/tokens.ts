// ssh_config(5) TOKENS and ${VAR}s in the options that take them, expanded as ssh.c does
// (default_client_percent_dollar_expand), for one hop of a chain.
import os from 'node:os';
import path from 'node:path';
import { envValue, SshConfigError, type SshConfigFile } from './config.js';

export interface ResolveEnv {
  /** $SSH_AUTH_SOCK; the process's by default. */
  authSock?: string;
}

/**
 * %-tokens of ssh_config(5) TOKENS that make sense here (any other is refused), and with `env`
 * ${VAR}s too, in the same pass as ssh.c default_client_percent_dollar_expand.
 */
export function expandTokens(text: string, hop: HopBase, config: SshConfigFile, option: string, env?: ResolveEnv): string {
  return text.replace(/\$\{([^}]*)\}|%(.)/g, (all, name: string | undefined, t: string | undefined) => {
    if (name !== undefined) return env ? envValue(name, varsOf(config, env), `host ${hop.alias} (${config.file}): ${option}`) : all;
    switch (t) {
      case '%':
        return '%';
      case 'h':
        return hop.hostName;
      case 'p':
        return String(hop.port);
      case 'r':
        return hop.user;
      case 'n':
        return hop.alias;
      case 'u':
        return config.localUser;
      case 'd':
        return config.home;
      case 'L':
        return os.hostname().split('.')[0]!;
      case 'l':
        return os.hostname();
      case 'i':
        if (process.getuid) return String(process.getuid());
        break;
      case 'k':
        if (hop.keyAlias !== undefined) return hop.keyAlias;
        break;
      case 'C':
        // Its hash takes in %j from OpenSSH 9.4 on: which one the user's ssh wrote is unknowable.
        throw new SshConfigError(
          `host ${hop.alias} (${config.file}): ${option} uses the token %C, whose value depends on the OpenSSH version: write the path out`,
        );
    }
    throw new SshConfigError(`host ${hop.alias} (${config.file}): ${option} uses the token ${all}, which is not supported`);
  });
}

/** The environment for ${VAR}: the config's, with ResolveEnv's SSH_AUTH_SOCK when given. */
export function varsOf(config: SshConfigFile, env: ResolveEnv): NodeJS.ProcessEnv {
  return env.authSock === undefined ? config.env : { ...config.env, SSH_AUTH_SOCK: env.authSock };
}

export type HopBase = { alias: string; hostName: string; port: number; user: string; keyAlias?: string };

export function expandPath(file: string, hop: HopBase, config: SshConfigFile, option: string, env?: ResolveEnv): string {
  return homePath(expandTokens(file, hop, config, option, env), config);
}

export function homePath(file: string, config: SshConfigFile): string {
  const out = file === '~' || file.startsWith('~/') ? path.join(config.home, file.slice(1)) : file;
  return path.isAbsolute(out) ? out : path.join(config.home, out);
}
