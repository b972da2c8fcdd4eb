// The config file's schema, checked strictly: every key known, every value of its type, every
// suffix and CIDR well formed, route names and contexts unique. Each error names the file, the
// line and the key (routes[1].include[0]), in one line.
import path from 'node:path';
import { StartupError } from '../core/errors.js';
import { parseCidr } from '../core/cidr.js';
import { closestWord } from '../core/edit-distance.js';
import { forwardListenProblem, parseForwardSpec } from '../core/address.js';
import { parsePattern, routeNameProblem } from '../routing/table-spec.js';
import {
  ROUTE_KINDS,
  type ClusterRouteSpec,
  type IngressSpec,
  type KonnectivityRouteSpec,
  type RouteKind,
  type RouteSpec,
  type SshRouteSpec,
} from '../routes/spec.js';
import { KONNECTIVITY_MODES, parseServerAddress, tlsProblem, type KonnectivitySpec } from '../konnectivity/options.js';
import { loadYamlWithLines, YamlSyntaxError, type Located } from './yaml-lines.js';

/** A config file that cannot be used: "FILE:LINE: key: what is wrong". */
export class ConfigError extends StartupError {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly key: string,
    problem: string,
  ) {
    super(`${file}:${line}: ${key ? `${key}: ` : ''}${problem}`);
    this.name = 'ConfigError';
  }
}

/** The validated file, before flags are merged in (config/table.ts). */
export interface ConfigFile {
  file: string;
  direct?: boolean;
  /** Line of `direct:`, for messages. */
  directLine?: number;
  routes: RouteSpec[];
  /** Name of the route marked `default: true`, if any. */
  defaultRoute?: string;
  /** `extra-ca`: a PEM bundle trusted for the API connections besides the kubeconfig's CA (absolute). */
  extraCA?: string;
  /** Old spellings the file used, each a line to warn with ("config.yaml:3: "extraCA" is now "extra-ca" …"). */
  deprecations?: string[];
  /** `forward`: port mappings "[ADDR:]LPORT=TARGET:PORT" (checked here, bound at start). */
  forwards?: string[];
}

const TOP_KEYS = ['direct', 'routes', 'extra-ca', 'forward'];
/** Old spellings still read (key → its name now): config keys are kebab-case, as the flags and kubeconfig keys. */
const RENAMED_KEYS: Record<string, string> = { extraCA: 'extra-ca' };

/** The key the file spells `now` with: its old spelling when the file uses that, else `now`. */
function spelling(map: Record<string, unknown>, now: string): string {
  return Object.keys(RENAMED_KEYS).find((old) => RENAMED_KEYS[old] === now && old in map) ?? now;
}
const COMMON_KEYS = ['name', 'kind', 'include', 'exclude', 'cidrs'];
/** Keys each kind takes beyond COMMON_KEYS. A new kind (ssh, konnectivity) adds its line here. */
const KIND_KEYS: Record<RouteKind, string[]> = {
  cluster: ['context', 'default', 'ingress', 'via'],
  direct: ['allow'],
  reject: [],
  ssh: ['ssh'],
  konnectivity: ['context', 'default', 'konnectivity'],
};
const SSH_KEYS = ['host'];
/** An ssh_config Host alias or [user@]host[:port]: no spaces, no options smuggled in ("-oProxyCommand=…"). */
const SSH_HOST = /^(?!-)[A-Za-z0-9_.@:%+\[\]-]+$/;
/** konnectivity: { server, mode, ca, cert, key } — see konnectivity/options.ts. */
const KONNECTIVITY_KEYS = ['server', 'mode', 'ca', 'cert', 'key'];
const INGRESS_KEYS = ['domains', 'controller', 'classes'];
const CONTROLLER = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\/[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

const isMapping = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const typeName = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'a mapping' : `${typeof v} ${JSON.stringify(v)}`);

/** Parses and validates a config file's text. `clusterDomain` is needed to check route names. */
export function parseConfig(text: string, file: string, clusterDomain: string): ConfigFile {
  let doc: Located;
  try {
    doc = loadYamlWithLines(text);
  } catch (err) {
    if (err instanceof YamlSyntaxError) throw new ConfigError(file, err.line, '', `not valid YAML: ${err.message}`);
    throw err;
  }
  return new Checker(doc, file, clusterDomain).top();
}

class Checker {
  constructor(
    private readonly doc: Located,
    private readonly file: string,
    private readonly clusterDomain: string,
  ) {}

  private fail(line: number, key: string, problem: string): never {
    throw new ConfigError(this.file, line, key, problem);
  }

  private keys(map: Record<string, unknown>, allowed: string[], path: string, what: string): void {
    for (const key of Object.keys(map)) {
      if (!allowed.includes(key) && !(allowed.includes(RENAMED_KEYS[key] ?? '') && path === '')) {
        const meant = closestWord(key, allowed);
        this.fail(
          this.doc.keyLine(map, key),
          `${path}${key}`,
          `unknown key in ${what}${meant ? `; did you mean "${meant}"?` : ''} (allowed: ${allowed.join(', ')})`,
        );
      }
    }
  }

  top(): ConfigFile {
    const root = this.doc.value ?? {};
    if (!isMapping(root)) this.fail(1, '', `the file must be a mapping with "direct", "routes", "extra-ca" and "forward", not ${typeName(root)}`);
    this.keys(root, TOP_KEYS, '', 'the top level');
    const out: ConfigFile = { file: this.file, routes: [] };
    if ('direct' in root) {
      out.directLine = this.doc.keyLine(root, 'direct');
      out.direct = this.bool(root.direct, out.directLine, 'direct');
    }
    for (const [old, now] of Object.entries(RENAMED_KEYS)) {
      if (!(old in root)) continue;
      if (now in root) this.fail(this.doc.keyLine(root, old), old, `give "${now}" only ("${old}" is its old spelling)`);
      (out.deprecations ??= []).push(`${this.file}:${this.doc.keyLine(root, old)}: "${old}" is now "${now}"; the old spelling still works`);
    }
    const caKey = spelling(root, 'extra-ca');
    if (caKey in root) out.extraCA = this.pathIn(this.str(root[caKey], this.doc.keyLine(root, caKey), caKey));
    if ('forward' in root) out.forwards = this.forwards(root.forward, this.doc.keyLine(root, 'forward'));
    const routes = root.routes ?? [];
    if (!Array.isArray(routes)) this.fail(this.doc.keyLine(root, 'routes'), 'routes', `must be a list of routes, not ${typeName(routes)}`);
    const names = new Map<string, number>();
    const contexts = new Map<string, string>();
    routes.forEach((raw, i) => {
      const line = this.doc.itemLine(routes, i);
      const route = this.route(raw, `routes[${i}]`, line);
      const seen = names.get(route.name);
      if (seen !== undefined)
        this.fail(this.doc.keyLine(raw as object, 'name'), `routes[${i}].name`, `route name "${route.name}" is already used on line ${seen}`);
      names.set(route.name, this.doc.keyLine(raw as object, 'name'));
      if (route.kind === 'cluster' || route.kind === 'konnectivity') {
        const other = contexts.get(route.context);
        if (other)
          this.fail(this.doc.keyLine(raw as object, 'context'), `routes[${i}].context`, `context "${route.context}" is already used by route ${other}`);
        contexts.set(route.context, route.name);
        if ((raw as Record<string, unknown>).default === true) {
          if (out.defaultRoute)
            this.fail(
              this.doc.keyLine(raw as object, 'default'),
              `routes[${i}].default`,
              `route ${out.defaultRoute} is already the default; only one route can be`,
            );
          out.defaultRoute = route.name;
        }
      }
      out.routes.push(route);
    });
    return out;
  }

  private route(raw: unknown, path: string, line: number): RouteSpec {
    if (!isMapping(raw)) this.fail(line, path, `a route must be a mapping with name and kind, not ${typeName(raw)}`);
    const at = (key: string) => this.doc.keyLine(raw, key);
    if (!('name' in raw)) this.fail(line, path, 'a route needs a name');
    if (!('kind' in raw)) this.fail(line, path, `a route needs a kind (${ROUTE_KINDS.join(', ')})`);
    const kind = this.str(raw.kind, at('kind'), `${path}.kind`);
    if (!(ROUTE_KINDS as readonly string[]).includes(kind)) {
      this.fail(at('kind'), `${path}.kind`, `unknown kind "${kind}" (supported: ${ROUTE_KINDS.join(', ')})`);
    }
    const k = kind as RouteKind;
    this.keys(raw, [...COMMON_KEYS, ...KIND_KEYS[k]], `${path}.`, `${k === 'ssh' ? 'an' : 'a'} ${k} route`);
    const name = this.str(raw.name, at('name'), `${path}.name`).toLowerCase();
    const problem = routeNameProblem(name, k, this.clusterDomain);
    if (problem) this.fail(at('name'), `${path}.name`, problem);
    const base = {
      name,
      include: this.patterns(raw, 'include', path, { wildcard: true, root: true }),
      exclude: this.patterns(raw, 'exclude', path, { wildcard: true, root: false }),
      cidrs: this.cidrs(raw, path),
      origin: `${this.file}:${line}`,
    };
    if (k === 'ssh') {
      if (!('ssh' in raw)) this.fail(line, path, 'an ssh route needs ssh: { host: NAME } (a Host of ~/.ssh/config)');
      return { kind: 'ssh', ...base, ssh: this.ssh(raw.ssh, at('ssh'), `${path}.ssh`) };
    }
    if (k === 'konnectivity') {
      if (!('konnectivity' in raw)) this.fail(line, path, 'a konnectivity route needs konnectivity: {server, mode, ca, cert, key}');
      const spec: KonnectivityRouteSpec = {
        kind: 'konnectivity',
        ...base,
        context: name,
        konnectivity: this.konnectivity(raw.konnectivity, at('konnectivity'), `${path}.konnectivity`),
      };
      if ('context' in raw) spec.context = this.str(raw.context, at('context'), `${path}.context`);
      if ('default' in raw) this.bool(raw.default, at('default'), `${path}.default`);
      return spec;
    }
    if (k === 'direct') {
      const allow = this.cidrs(raw, path, 'allow');
      return allow.length > 0 ? { kind: 'direct', ...base, allow } : { kind: 'direct', ...base };
    }
    if (k !== 'cluster') return { kind: k, ...base };
    const spec: ClusterRouteSpec = { kind: 'cluster', ...base, context: name };
    if ('context' in raw) spec.context = this.str(raw.context, at('context'), `${path}.context`);
    if ('default' in raw) this.bool(raw.default, at('default'), `${path}.default`);
    if ('ingress' in raw) spec.ingress = this.ingress(raw.ingress, at('ingress'), `${path}.ingress`);
    if ('via' in raw) {
      spec.via = this.str(raw.via, at('via'), `${path}.via`).toLowerCase();
      spec.viaLine = at('via');
    }
    return spec;
  }

  /** `forward: ["5432=db.shop:5432", …]`: each a mapping on loopback (a mapping cannot ask for credentials). */
  private forwards(value: unknown, line: number): string[] {
    if (value === null) return [];
    if (!Array.isArray(value)) this.fail(line, 'forward', `must be a list of port mappings, e.g. ["5432=db.shop:5432"], not ${typeName(value)}`);
    return value.map((item, i) => {
      const itemLine = this.doc.itemLine(value, i);
      const key = `forward[${i}]`;
      const text = this.str(item, itemLine, key);
      let spec;
      try {
        spec = parseForwardSpec(text);
      } catch (err) {
        return this.fail(itemLine, key, (err as Error).message);
      }
      const problem = forwardListenProblem(spec);
      if (problem) this.fail(itemLine, key, problem);
      return text;
    });
  }

  private ingress(raw: unknown, line: number, path: string): IngressSpec {
    if (!isMapping(raw)) this.fail(line, path, `must be a mapping with domains and controller, not ${typeName(raw)}`);
    this.keys(raw, INGRESS_KEYS, `${path}.`, 'ingress');
    const spec: IngressSpec = { domains: this.patterns(raw, 'domains', path, { wildcard: true, root: false }) };
    if ('controller' in raw) {
      const key = `${path}.controller`;
      const controller = this.str(raw.controller, this.doc.keyLine(raw, 'controller'), key);
      if (!CONTROLLER.test(controller))
        this.fail(this.doc.keyLine(raw, 'controller'), key, `"${controller}" is not namespace/service (e.g. openshift-ingress/router-default)`);
      spec.controller = controller;
    }
    if ('classes' in raw) spec.classes = this.ingressClasses(raw.classes, this.doc.keyLine(raw, 'classes'), `${path}.classes`);
    return spec;
  }

  /** Ingress class name → "namespace/service" ({internal: ingress-internal/ingress-nginx-controller}). */
  private ingressClasses(raw: unknown, line: number, path: string): Record<string, string> {
    if (!isMapping(raw)) this.fail(line, path, `must be a mapping of ingress class names to namespace/service, not ${typeName(raw)}`);
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(raw)) {
      const key = `${path}.${name}`;
      const valueLine = this.doc.keyLine(raw, name);
      const target = this.str(value, valueLine, key);
      if (!CONTROLLER.test(target)) this.fail(valueLine, key, `"${target}" is not namespace/service (e.g. ingress-internal/ingress-nginx-controller)`);
      out[name] = target;
    }
    return out;
  }

  private ssh(raw: unknown, line: number, path: string): SshRouteSpec['ssh'] {
    if (!isMapping(raw)) this.fail(line, path, `must be a mapping with host, e.g. {host: jump.example.com}, not ${typeName(raw)}`);
    this.keys(raw, SSH_KEYS, `${path}.`, 'ssh');
    if (!('host' in raw)) this.fail(line, `${path}.host`, 'is required: a Host of ~/.ssh/config or [user@]host[:port]');
    const host = this.str(raw.host, this.doc.keyLine(raw, 'host'), `${path}.host`);
    if (!SSH_HOST.test(host))
      this.fail(this.doc.keyLine(raw, 'host'), `${path}.host`, `"${host}" is not an ssh host (a Host of ~/.ssh/config or [user@]host[:port])`);
    return { host };
  }

  private konnectivity(raw: unknown, line: number, path: string): KonnectivitySpec {
    if (!isMapping(raw)) this.fail(line, path, `must be a mapping with server, mode, ca, cert and key, not ${typeName(raw)}`);
    this.keys(raw, KONNECTIVITY_KEYS, `${path}.`, 'konnectivity');
    const at = (key: string) => this.doc.keyLine(raw, key);
    if (!('server' in raw)) this.fail(line, path, 'needs a server: https://host:port or unix:///path');
    const server = this.str(raw.server, at('server'), `${path}.server`);
    try {
      parseServerAddress(server);
    } catch (err) {
      this.fail(at('server'), `${path}.server`, (err as Error).message);
    }
    const mode = 'mode' in raw ? this.str(raw.mode, at('mode'), `${path}.mode`) : 'grpc';
    if (!(KONNECTIVITY_MODES as readonly string[]).includes(mode))
      this.fail(at('mode'), `${path}.mode`, `unknown mode "${mode}" (supported: ${KONNECTIVITY_MODES.join(', ')})`);
    const spec: KonnectivitySpec = { server, mode: mode as KonnectivitySpec['mode'] };
    for (const key of ['ca', 'cert', 'key'] as const) if (key in raw) spec[key] = this.pathIn(this.str(raw[key], at(key), `${path}.${key}`));
    const problem = tlsProblem(spec);
    if (problem) this.fail(line, path, problem);
    return spec;
  }

  private list(map: Record<string, unknown>, key: string, path: string): Array<{ text: string; line: number; path: string }> {
    if (!(key in map)) return [];
    const value = map[key];
    const line = this.doc.keyLine(map, key);
    if (value === null) return [];
    if (!Array.isArray(value))
      this.fail(line, `${path}.${key}`, `must be a list, e.g. [${typeof value === 'string' ? value : 'example.com'}], not ${typeName(value)}`);
    return value.map((item, i) => {
      const itemLine = this.doc.itemLine(value, i);
      return { text: this.str(item, itemLine, `${path}.${key}[${i}]`), line: itemLine, path: `${path}.${key}[${i}]` };
    });
  }

  private patterns(map: Record<string, unknown>, key: string, path: string, allow: { wildcard: boolean; root: boolean }): string[] {
    return this.list(map, key, path).map((item) => {
      try {
        return parsePattern(item.text, allow);
      } catch (err) {
        return this.fail(item.line, item.path, (err as Error).message);
      }
    });
  }

  private cidrs(map: Record<string, unknown>, path: string, key = 'cidrs'): string[] {
    return this.list(map, key, path).map((item) => {
      try {
        return parseCidr(item.text).text;
      } catch (err) {
        return this.fail(item.line, item.path, (err as Error).message);
      }
    });
  }

  /**
   * A file the config file names, made absolute: relative to the config file, as kubeconfig paths
   * are relative to the kubeconfig (the proxy's working directory is not where the file lives).
   */
  private pathIn(file: string): string {
    return path.resolve(path.dirname(path.resolve(this.file)), file);
  }

  private str(value: unknown, line: number, key: string): string {
    if (typeof value !== 'string' || value.trim() === '') this.fail(line, key, `must be a non-empty string, not ${typeName(value)}`);
    return value.trim();
  }

  private bool(value: unknown, line: number, key: string): boolean {
    if (typeof value !== 'boolean') this.fail(line, key, `must be true or false, not ${typeName(value)}`);
    return value;
  }
}
