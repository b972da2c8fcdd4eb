// ~/.ssh/config read the way OpenSSH reads it (ssh_config(5), readconf.c): lines in file order,
// Host and Match blocks apply when they match, and for each option the FIRST value obtained wins
// (IdentityFile accumulates). The `ssh-config` package parses the text (quoting, "Key=value",
// comments); which blocks apply is decided here, because its own compute() differs from OpenSSH
// ("?" matches zero characters, Include is not followed, Match exec runs commands).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SSHConfig from 'ssh-config';

/** A config that cannot be used: names the file (and host) so the user can fix it. */
export class SshConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SshConfigError';
  }
}

/** Options for one host, keys lowercased; every value as written (tokens not yet expanded). */
export type HostOptions = Map<string, string[]>;

interface Line {
  type: number;
  param?: string;
  value?: string | Array<{ val: string; separator?: string; quoted?: boolean }>;
  quoted?: boolean;
  criteria?: Record<string, string | string[]>;
  config?: Line[];
  /** A command option's text exactly as written (commandLines). */
  command?: string;
}

const DIRECTIVE = 1;
/** Options that may be given several times, every value kept (readconf.c: IdentityFile, …). */
const ACCUMULATE = new Set(['identityfile', 'certificatefile', 'localforward', 'remoteforward', 'dynamicforward', 'sendenv', 'setenv']);
/** Options whose value is a command line: the text is kept as written. */
const COMMANDS = new Set(['proxycommand', 'localcommand', 'remotecommand', 'knownhostscommand']);
/** One setting under two names: the first of either read, "none" included, wins (readconf.c parse_jump). */
const PROXY = new Set(['proxyjump', 'proxycommand']);
/** Match criteria we can evaluate without running anything. */
const MATCH_CRITERIA = new Set(['all', 'host', 'originalhost', 'user', 'localuser']);
const MAX_INCLUDE_DEPTH = 16; // readconf.c READCONF_MAX_DEPTH
export const SYSTEM_SSH_CONFIG = '/etc/ssh/ssh_config';

/** Where relative Include paths go, and whether "~" is expanded in them (a user file only). */
interface Origin {
  includeDir: string;
  user: boolean;
}

export interface ReadOptions {
  /** The file to read (~/.ssh/config by default); a missing file is an empty config. */
  file?: string;
  /** The home directory for "~" and relative Include paths (os.homedir() by default). */
  home?: string;
  /** The local user name (%u, Match localuser). */
  localUser?: string;
  /** The environment ${VAR} is read from (process.env by default). */
  env?: NodeJS.ProcessEnv;
  /**
   * The system-wide file, read after `file` (ssh.c process_config_files); null for none. By
   * default /etc/ssh/ssh_config when neither `file` nor `home` is given, else none (as `ssh -F`).
   */
  systemFile?: string | null;
}

export class SshConfigFile {
  readonly file: string;
  readonly home: string;
  readonly localUser: string;
  readonly env: NodeJS.ProcessEnv;
  private readonly lines: Line[];

  constructor(options: ReadOptions = {}) {
    this.home = options.home ?? os.homedir();
    this.localUser = options.localUser ?? safeUserName();
    this.env = options.env ?? process.env;
    this.file = options.file ?? path.join(this.home, '.ssh', 'config');
    const system = options.systemFile !== undefined ? options.systemFile : options.file === undefined && options.home === undefined ? SYSTEM_SSH_CONFIG : null;
    // One list, user file first: the first value obtained wins across both, as in ssh.
    this.lines = [
      ...this.load(this.file, 0, true, { includeDir: path.join(this.home, '.ssh'), user: true }),
      ...(system ? this.load(system, 0, true, { includeDir: path.dirname(system), user: false }) : []),
    ];
  }

  /** Text of a config, for tests: parsed as if it were `file`. */
  static fromText(text: string, options: ReadOptions & { file: string }): SshConfigFile {
    const config = Object.create(SshConfigFile.prototype) as SshConfigFile;
    Object.assign(config, {
      home: options.home ?? os.homedir(),
      localUser: options.localUser ?? safeUserName(),
      env: options.env ?? process.env,
      file: options.file,
    });
    Object.assign(config, { lines: config.parse(text, options.file, 0, { includeDir: path.join(config.home, '.ssh'), user: true }) });
    return config;
  }

  private load(file: string, depth: number, optional: boolean, origin: Origin): Line[] {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if (optional && (err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new SshConfigError(`cannot read ssh config ${file}: ${(err as Error).message}`);
    }
    return this.parse(text, file, depth, origin);
  }

  private parse(text: string, file: string, depth: number, origin: Origin): Line[] {
    let parsed: Line[];
    try {
      parsed = SSHConfig.parse(text) as unknown as Line[];
    } catch (err) {
      throw new SshConfigError(`cannot parse ssh config ${file}: ${(err as Error).message}`);
    }
    attachCommands(parsed, commandLines(text));
    // Include is expanded in place, inside the block it appears in (readconf.c process_config_line).
    const expand = (lines: Line[]): Line[] =>
      lines.flatMap((line) => {
        if (line.type !== DIRECTIVE) return [];
        if (line.config) return [{ ...line, config: expand(line.config) }];
        if (line.param?.toLowerCase() !== 'include') return [line];
        if (depth >= MAX_INCLUDE_DEPTH) throw new SshConfigError(`${file}: Include nested more than ${MAX_INCLUDE_DEPTH} deep`);
        return words(line).flatMap((pattern) =>
          this.includeFiles(expandEnv(pattern, this.env, `${file}: Include`), origin).flatMap((f) => this.load(f, depth + 1, false, origin)),
        );
      });
    return expand(parsed);
  }

  /** Include paths: "~" expanded, relative ones under ~/.ssh (/etc/ssh for the system file), globs in the last component. */
  private includeFiles(pattern: string, origin: Origin): string[] {
    let full = origin.user && pattern.startsWith('~') ? path.join(this.home, pattern.slice(1)) : pattern;
    if (!path.isAbsolute(full)) full = path.join(origin.includeDir, full);
    const dir = path.dirname(full);
    const base = path.basename(full);
    if (/[*?[]/.test(dir)) throw new SshConfigError(`Include ${pattern}: wildcards are only supported in the file name`);
    if (!/[*?]/.test(base)) return existsFile(full) ? [full] : [];
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    return names
      .filter((n) => !n.startsWith('.') && matchPattern(base, n))
      .sort()
      .map((n) => path.join(dir, n))
      .filter(existsFile);
  }

  /**
   * The options for `host` (the name given, an alias): every Host/Match block that matches, in
   * file order, first value wins. `user` is a user given with the name (user@host), which beats
   * the config's User, as on OpenSSH's command line.
   */
  optionsFor(host: string, user?: string): HostOptions {
    const out: HostOptions = new Map();
    if (user !== undefined) out.set('user', [user]);
    const set = (line: Line) => {
      const key = line.param!.toLowerCase();
      const values = key === 'include' ? [] : COMMANDS.has(key) ? [commandText(line)] : ACCUMULATE.has(key) ? words(line) : [words(line).join(' ')];
      if (ACCUMULATE.has(key)) out.set(key, [...(out.get(key) ?? []), ...values]);
      else if (PROXY.has(key) && (out.has('proxyjump') || out.has('proxycommand'))) return;
      else if (!out.has(key)) out.set(key, values);
    };
    const walk = (lines: Line[]) => {
      for (const line of lines) {
        const key = line.param?.toLowerCase();
        if (key === 'host') {
          if (hostMatches(words(line), host)) walk(line.config ?? []);
        } else if (key === 'match') {
          if (this.matchApplies(line, host, out)) walk(line.config ?? []);
        } else if (line.param) {
          set(line);
        }
      }
    };
    walk(this.lines);
    return out;
  }

  /** Match blocks (ssh_config(5) "Match"); criteria that would run commands are refused. */
  private matchApplies(line: Line, host: string, options: HostOptions): boolean {
    const criteria = Object.entries(line.criteria ?? {});
    for (const [name, value] of criteria) {
      const negated = name.startsWith('!');
      const key = name.replace(/^!/, '').toLowerCase();
      if (!MATCH_CRITERIA.has(key)) throw new SshConfigError(`${this.file}: "Match ${key}" is not supported (supported: ${[...MATCH_CRITERIA].join(', ')})`);
      if (key === 'all') continue;
      const list = (Array.isArray(value) ? value : [value]).flatMap((v) => v.split(','));
      // "Match host" sees the HostName read so far with %h (and %%) expanded (readconf.c match_cfg_line).
      const hostName = options.get('hostname')?.[0]?.replace(/%([h%])/g, (_all, t: string) => (t === 'h' ? host : '%'));
      const subject =
        key === 'host' ? (hostName ?? host) : key === 'originalhost' ? host : key === 'user' ? (options.get('user')?.[0] ?? this.localUser) : this.localUser;
      // match_hostname ignores case (readconf.c match_cfg_line); user names are compared as written.
      if (matchList(list, subject, key === 'host' || key === 'originalhost') === negated) return false;
    }
    return true;
  }
}

/** ${VAR} from `env` (ssh_config(5) ENVIRONMENT VARIABLES); an unset one is an error naming it. */
export function expandEnv(text: string, env: NodeJS.ProcessEnv, where: string): string {
  return text.replace(/\$\{([^}]*)\}/g, (_all, name: string) => envValue(name, env, where));
}

export function envValue(name: string, env: NodeJS.ProcessEnv, where: string): string {
  const value = env[name];
  if (value === undefined) throw new SshConfigError(`${where} uses \${${name}}, which is not set in the environment`);
  return value;
}

/**
 * ssh_config pattern: "*" any run, "?" exactly one character, case-sensitive unless asked
 * (match.c match_pattern; host names in Match and known_hosts are compared ignoring case).
 */
export function matchPattern(pattern: string, text: string, ignoreCase = false): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`, ignoreCase ? 'i' : '').test(text);
}

/**
 * A pattern list (match.c match_pattern_list): any negated pattern that matches rejects the
 * whole list, whatever else matches; otherwise any positive match accepts.
 */
export function matchList(patterns: string[], text: string, ignoreCase = false): boolean {
  let matched = false;
  for (const p of patterns) {
    if (p.startsWith('!')) {
      if (matchPattern(p.slice(1), text, ignoreCase)) return false;
    } else if (matchPattern(p, text, ignoreCase)) matched = true;
  }
  return matched;
}

/** A Host line's words, each one pattern: no comma lists, case-sensitive (readconf.c oHost). */
function hostMatches(patterns: string[], host: string): boolean {
  return matchList(
    patterns.filter((p) => p !== ''),
    host,
  );
}

function words(line: Line): string[] {
  const v = line.value;
  if (v === undefined) return [];
  if (typeof v === 'string') return [v];
  return v.map((w) => w.val);
}

/**
 * The text of each command option (ProxyCommand, …) in the file, in order: the rest of its line
 * after the keyword and its whitespace or "=", trailing whitespace cut, as readconf.c keeps it.
 * The parser's words lose where quotes stood (`"a b"; c` came back as `"a b;" c`).
 */
function commandLines(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const m = /^\s*([A-Za-z]+)(?:\s*=\s*|\s+)(.*?)\s*$/.exec(raw);
    if (m && COMMANDS.has(m[1]!.toLowerCase())) out.push(m[2]!);
  }
  return out;
}

/** Gives each parsed command option its text from commandLines, both in file order. */
function attachCommands(lines: Line[], texts: string[], at = { next: 0 }): void {
  for (const line of lines) {
    if (line.type !== DIRECTIVE) continue;
    if (line.config) attachCommands(line.config, texts, at);
    else if (COMMANDS.has(line.param?.toLowerCase() ?? '')) line.command = texts[at.next++];
  }
}

/** A command option's text as written (quotes kept), as readconf.c keeps the rest of the line. */
function commandText(line: Line): string {
  if (line.command !== undefined) return line.command;
  const v = line.value;
  if (typeof v === 'string' || v === undefined) return v ?? '';
  return v
    .map((w) => `${w.separator ?? ' '}${w.quoted ? `"${w.val.replace(/"/g, '\\"')}"` : w.val}`)
    .join('')
    .trim();
}

function existsFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function safeUserName(): string {
  try {
    return os.userInfo().username;
  } catch {
    return process.env.USER ?? process.env.LOGNAME ?? 'root';
  }
}
