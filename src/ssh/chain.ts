// From a Host name to the list of SSH servers to go through, as `ssh NAME` would: ProxyJump
// (comma lists, [user@]host[:port], ssh:// URIs; readconf.c parse_jump), `ProxyCommand ssh -W
// %h:%p JUMP` taken as a jump, any other ProxyCommand run as the first hop's transport. Options
// that would change what ssh does and that we do not do are refused here, at start, naming the
// option and the host (a daemon must not quietly behave unlike `ssh`).
import { SshConfigError, type HostOptions, type SshConfigFile } from './config.js';
import { parseHostKeyAlgorithms, type HostKeyAlgorithms } from './host-key-algorithms.js';
import { expandPath, expandTokens, homePath, varsOf, type HopBase, type ResolveEnv } from './tokens.js';

export type { ResolveEnv } from './tokens.js';

export type HostKeyPolicy = 'yes' | 'accept-new';

/** One SSH server of a chain, with everything needed to log in to it. */
export interface SshHop {
  /** The name as given (config alias, jump spec host), for messages. */
  alias: string;
  /** Where to connect (HostName, tokens expanded). */
  hostName: string;
  port: number;
  user: string;
  /** Private key files, absolute, in config order (defaults when none is configured). */
  identityFiles: string[];
  /** Whether IdentityFile was set (defaults that do not exist are skipped quietly). */
  identityFilesConfigured: boolean;
  /** IdentitiesOnly: of the agent's keys, only those of the IdentityFiles are offered. */
  identitiesOnly: boolean;
  /** The agent socket: IdentityAgent, else $SSH_AUTH_SOCK; undefined when none. */
  agentSocket?: string;
  hostKeyPolicy: HostKeyPolicy;
  /** UserKnownHostsFile entries (the first is where accept-new appends); GlobalKnownHostsFile after. */
  knownHostsFiles: string[];
  globalKnownHostsFiles: string[];
  hashKnownHosts: boolean;
  /** Name the host key is stored under (HostKeyAlias), instead of hostName/[hostName]:port. */
  hostKeyAlias?: string;
  /** HostKeyAlgorithms as set (undefined: ssh2's defaults, known_hosts' key types first). */
  hostKeyAlgorithms?: HostKeyAlgorithms;
  serverAliveIntervalMs: number;
  serverAliveCountMax: number;
  connectTimeoutMs?: number;
  family?: 4 | 6;
  /** Only on the first hop: a command whose stdin/stdout carry the connection (sh -c). */
  proxyCommand?: string;
}

const DEFAULT_IDENTITIES = ['id_rsa', 'id_ecdsa', 'id_ecdsa_sk', 'id_ed25519', 'id_ed25519_sk', 'id_xmss', 'id_dsa'];
const MAX_HOPS = 16;

/** Options that change ssh's behaviour in ways we do not follow: refused with the reason. */
const REFUSED: Record<string, (value: string) => string | undefined> = {
  permitlocalcommand: (v) => (yes(v) ? 'runs LocalCommand on this machine after connecting' : undefined),
  certificatefile: () => 'certificate authentication is not supported',
  pkcs11provider: (v) => (v.toLowerCase() === 'none' ? undefined : 'PKCS#11 keys are not supported (load them into ssh-agent instead)'),
  securitykeyprovider: (v) => (v.toLowerCase() === 'internal' ? undefined : 'security key providers are not supported (use ssh-agent)'),
  knownhostscommand: () => 'host keys are only read from known_hosts files',
  proxyusefdpass: (v) => (yes(v) ? 'ProxyCommand fd passing is not supported' : undefined),
  canonicalizehostname: (v) => (['yes', 'always'].includes(v.toLowerCase()) ? 'host name canonicalization is not supported' : undefined),
  bindaddress: () => 'choosing the local address is not supported',
  bindinterface: () => 'choosing the local interface is not supported',
  tunnel: (v) => (v.toLowerCase() === 'no' ? undefined : 'tun/tap forwarding is not supported'),
  // readconf.c: "false" is "off" too, as "true" is "yes".
  stricthostkeychecking: (v) =>
    ['no', 'off', 'false'].includes(v.toLowerCase()) ? 'host keys are always checked (use "accept-new" to let new hosts in)' : undefined,
  userknownhostsfile: (v) => (v.split(/\s+/).includes('/dev/null') ? 'host keys are always checked; known_hosts cannot be /dev/null' : undefined),
};

/** A hop's text for messages: "jump1 (admin@10.0.0.1:22)". */
export function describeHop(hop: SshHop): string {
  const where = `${hop.user}@${hop.hostName.includes(':') ? `[${hop.hostName}]` : hop.hostName}:${hop.port}`;
  return hop.alias === hop.hostName ? where : `${hop.alias} (${where})`;
}

/** Splits "[user@]host[:port]" and "ssh://[user@]host[:port]" (readconf.c parse_ssh_uri, parse_user_host_port). */
export function parseJumpSpec(spec: string): { user?: string; host: string; port?: number } {
  let rest = spec.startsWith('ssh://') ? spec.slice(6).replace(/\/$/, '') : spec;
  let user: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    user = rest.slice(0, at);
    rest = rest.slice(at + 1);
  }
  let host = rest;
  let port: number | undefined;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(rest);
  if (bracket) {
    host = bracket[1]!;
    if (bracket[2]) port = Number(bracket[2]);
  } else if ((rest.match(/:/g) ?? []).length === 1) {
    [host] = rest.split(':') as [string];
    port = Number(rest.split(':')[1]);
  }
  if (!host || (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) || user === '') {
    throw new SshConfigError(`"${spec}" is not a jump host ([user@]host[:port])`);
  }
  return { user, host, port };
}

/**
 * The hops to reach `target` (the last hop is `target` itself); the first is dialled from here
 * (directly or through its ProxyCommand), each next one through a direct-tcpip channel of the one
 * before.
 */
export function resolveChain(config: SshConfigFile, target: string, env: ResolveEnv = {}): SshHop[] {
  const spec = parseJumpSpec(target);
  return chainFor(config, spec, env, 0, true);
}

function chainFor(config: SshConfigFile, spec: { user?: string; host: string; port?: number }, env: ResolveEnv, depth: number, followJumps: boolean): SshHop[] {
  if (depth > MAX_HOPS) throw new SshConfigError(`the ProxyJump chain to ${spec.host} is longer than ${MAX_HOPS} hops (a loop?)`);
  const options = config.optionsFor(spec.host, spec.user);
  const hop = hopFrom(config, spec, options, env);
  if (!followJumps) return [hop];
  // At most one of the two is set: they are one setting (config.ts keeps the first read).
  const jump = first(options, 'proxyjump');
  const command = first(options, 'proxycommand');
  if (jump !== undefined && jump.toLowerCase() !== 'none') {
    // "ProxyJump a,b": ssh reaches b with -J a (b's own ProxyJump is overridden), then -W the target.
    const specs = jump.split(',').map((s) => parseJumpSpec(s.trim()));
    const [head, ...rest] = specs;
    return [...chainFor(config, head!, env, depth + 1, true), ...rest.map((s) => chainFor(config, s, env, depth + 1, false)[0]!), hop];
  }
  if (command !== undefined && command.toLowerCase() !== 'none') {
    const jumpOf = sshDashW(command);
    if (jumpOf) return [...chainFor(config, jumpOf, env, depth + 1, true), hop];
    return [{ ...hop, proxyCommand: expandTokens(command, hop, config, 'ProxyCommand') }];
  }
  return [hop];
}

function hopFrom(config: SshConfigFile, spec: { user?: string; host: string; port?: number }, options: HostOptions, env: ResolveEnv): SshHop {
  const where = `host ${spec.host} (${config.file})`;
  for (const [key, values] of options) {
    const why = REFUSED[key]?.(values.join(' '));
    if (why) throw new SshConfigError(`${where}: ${canonicalName(key)} ${values.join(' ')} is not supported: ${why}`);
  }
  const portText = spec.port !== undefined ? String(spec.port) : (first(options, 'port') ?? '22');
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new SshConfigError(`${where}: Port ${portText} is not a port number`);
  const user = first(options, 'user') ?? config.localUser;
  const partial = { alias: spec.host, hostName: spec.host, port, user };
  const hostNameRaw = first(options, 'hostname');
  const hostName = hostNameRaw ? expandTokens(hostNameRaw, partial, config, 'HostName') : spec.host;
  // %k: the HostKeyAlias (lowercased, as ssh.c keeps it), else the host as it was asked for.
  const hostKeyAlias = first(options, 'hostkeyalias')?.toLowerCase();
  const base = { ...partial, hostName, keyAlias: hostKeyAlias ?? spec.host };
  const configured = options.get('identityfile') ?? [];
  const identityFiles = (configured.length > 0 ? configured : DEFAULT_IDENTITIES.map((n) => `~/.ssh/${n}`)).map((f) =>
    expandPath(f, base, config, 'IdentityFile', env),
  );
  const agentSocket = agentSocketFor(first(options, 'identityagent'), base, config, env);
  const strict = (first(options, 'stricthostkeychecking') ?? 'ask').toLowerCase();
  // "none" is no file at all, as OpenSSH reads it (ssh_config(5)), not a file named "none".
  const files = (v: string) => (v.trim().toLowerCase() === 'none' ? [] : v.split(/\s+/));
  const known = files(first(options, 'userknownhostsfile') ?? '~/.ssh/known_hosts ~/.ssh/known_hosts2');
  const globalKnown = files(first(options, 'globalknownhostsfile') ?? '/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2');
  const alive = Number(first(options, 'serveraliveinterval') ?? '15');
  const count = Number(first(options, 'serveralivecountmax') ?? '3');
  const timeout = first(options, 'connecttimeout');
  const family = (first(options, 'addressfamily') ?? 'any').toLowerCase();
  const algorithms = first(options, 'hostkeyalgorithms');
  let hostKeyAlgorithms: HostKeyAlgorithms | undefined;
  try {
    hostKeyAlgorithms = algorithms === undefined ? undefined : parseHostKeyAlgorithms(algorithms);
  } catch (err) {
    throw new SshConfigError(`${where}: ${(err as Error).message}`);
  }
  return {
    ...partial,
    hostName,
    identityFiles,
    identityFilesConfigured: configured.length > 0,
    identitiesOnly: yes(first(options, 'identitiesonly') ?? 'no'),
    agentSocket: agentSocket || undefined,
    // "ask" cannot ask anyone in a daemon: it refuses, like "yes".
    hostKeyPolicy: strict === 'accept-new' ? 'accept-new' : 'yes',
    knownHostsFiles: known.map((f) => expandPath(f, base, config, 'UserKnownHostsFile', env)),
    globalKnownHostsFiles: globalKnown.map((f) => expandPath(f, base, config, 'GlobalKnownHostsFile')),
    hashKnownHosts: yes(first(options, 'hashknownhosts') ?? 'no'),
    // ssh.c lowercases the alias as it does host names: known_hosts entries (hashed ones too) are of that form.
    hostKeyAlias,
    hostKeyAlgorithms,
    // OpenSSH's ServerAliveInterval 0 means off; we keep 15 s then, as a kept connection needs it.
    serverAliveIntervalMs: (Number.isFinite(alive) && alive > 0 ? alive : 15) * 1000,
    serverAliveCountMax: Number.isInteger(count) && count > 0 ? count : 3,
    connectTimeoutMs: timeout !== undefined && Number(timeout) > 0 ? Number(timeout) * 1000 : undefined,
    family: family === 'inet' ? 4 : family === 'inet6' ? 6 : undefined,
  };
}

/**
 * `ssh [-q] [-l user] [-p port] -W %h:%p host` and the same with options in another order: a
 * jump through `host`. Anything else (nc, corkscrew, connect-proxy, ssh with other options) is a
 * command to run.
 */
export function sshDashW(command: string): { user?: string; host: string; port?: number } | undefined {
  const argv = command.trim().split(/\s+/);
  if (argv[0] === 'exec') argv.shift();
  if (!argv[0] || !/(^|\/)ssh$/.test(argv[0])) return undefined;
  let user: string | undefined;
  let port: number | undefined;
  let host: string | undefined;
  let forward: string | undefined;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-W') forward = argv[++i];
    else if (a === '-l') user = argv[++i];
    else if (a === '-p') port = Number(argv[++i]);
    else if (/^-[qTx4]+$/.test(a)) continue;
    else if (a.startsWith('-')) return undefined;
    else if (host === undefined) host = a;
    else return undefined;
  }
  if (!host || !forward || !/^(\[%h\]|%h):%p$/.test(forward)) return undefined;
  const spec = parseJumpSpec(host);
  return { host: spec.host, user: user ?? spec.user, port: port ?? spec.port };
}

/** The agent's socket (ssh.c): "SSH_AUTH_SOCK" or unset is $SSH_AUTH_SOCK, "$VAR" a variable holding the path. */
function agentSocketFor(agent: string | undefined, hop: HopBase, config: SshConfigFile, env: ResolveEnv): string | undefined {
  const vars = varsOf(config, env);
  if (agent === undefined || agent === 'SSH_AUTH_SOCK') return vars.SSH_AUTH_SOCK || undefined;
  if (agent.toLowerCase() === 'none') return undefined;
  if (agent.startsWith('$') && !agent.startsWith('${')) {
    // An unset variable is no agent, as ssh leaves SSH_AUTH_SOCK unset then.
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(agent.slice(1)))
      throw new SshConfigError(`host ${hop.alias} (${config.file}): IdentityAgent ${agent} is not a variable name`);
    return vars[agent.slice(1)] || undefined;
  }
  // "${SSH_AUTH_SOCK}" with the variable empty is no agent, not the home directory.
  const socket = expandTokens(agent, hop, config, 'IdentityAgent', env);
  return socket ? homePath(socket, config) : undefined;
}

function first(options: HostOptions, key: string): string | undefined {
  return options.get(key)?.[0];
}

function yes(v: string): boolean {
  return ['yes', 'true'].includes(v.toLowerCase());
}

const NAMES: Record<string, string> = {
  permitlocalcommand: 'PermitLocalCommand',
  certificatefile: 'CertificateFile',
  pkcs11provider: 'PKCS11Provider',
  securitykeyprovider: 'SecurityKeyProvider',
  knownhostscommand: 'KnownHostsCommand',
  proxyusefdpass: 'ProxyUseFdpass',
  canonicalizehostname: 'CanonicalizeHostName',
  bindaddress: 'BindAddress',
  bindinterface: 'BindInterface',
  tunnel: 'Tunnel',
  stricthostkeychecking: 'StrictHostKeyChecking',
  userknownhostsfile: 'UserKnownHostsFile',
};

function canonicalName(key: string): string {
  return NAMES[key] ?? key;
}
