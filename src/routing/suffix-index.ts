// The name half of the routing table: every suffix rule of every route in one map keyed by the
// suffix text, so deciding a name costs one map probe per label of the name (walked from the
// whole name to its last label, then the root), whatever the number of routes.
//
// Precedence (longest suffix first, exclusions beat inclusions, made exact):
//   1. longer rules first; a rule's length is its labels as written, "*" counting as one
//      ("*.apps.x.com" is 4, "apps.x.com" is 3, "." is 0);
//   2. at equal length an exclude comes first: it beats an include of the same or shorter length;
//   3. at equal length a literal label beats a "*" (the longer literal key first).
// An exclude only takes its own route out of the running: the name may still fall to another
// route's shorter rule, then to direct pass-through or a refusal.

/** What kind of rule matched, as shown in claims, logs and `status`. */
export type RuleSource = 'route-name' | 'cluster-domain' | 'include' | 'exclude' | 'ingress' | 'ingress-host';

export interface SuffixRule {
  /** Index of the route in the table. */
  readonly route: number;
  readonly source: RuleSource;
  /** The pattern as written, normalized: "prod.example.com", "*.apps.x.com", ".", a route name. */
  readonly pattern: string;
  readonly exclude: boolean;
  /** Precedence length: labels of the pattern, "*" counting as one. */
  readonly length: number;
  /** Labels of the map key (the pattern without "*."). */
  readonly keyLabels: number;
  /** Labels a name needs beyond the key: 0 the suffix itself too, 1 strictly under it, 2 for <svc>.<ns>.<route>. */
  readonly minExtra: number;
  /** At most this many (0: the exact host only). */
  readonly maxExtra: number;
  /** Learnt at run time (Ingress hosts), replaced as the cluster changes; never checked for conflicts. */
  readonly dynamic: boolean;
}

export class RoutingTableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RoutingTableError';
  }
}

/** Number of labels in a normalized name ("" = the root = 0). */
export function labelCount(name: string): number {
  if (name === '') return 0;
  let n = 1;
  for (let i = name.indexOf('.'); i >= 0; i = name.indexOf('.', i + 1)) n++;
  return n;
}

/** The map key and label ranges of a normalized pattern ("." → root, "*.x" → under x). */
export function ruleShape(pattern: string): { key: string; length: number; keyLabels: number; minExtra: number } {
  if (pattern === '.') return { key: '', length: 0, keyLabels: 0, minExtra: 0 };
  if (pattern.startsWith('*.')) {
    const key = pattern.slice(2);
    const keyLabels = labelCount(key);
    return { key, length: keyLabels + 1, keyLabels, minExtra: 1 };
  }
  const keyLabels = labelCount(pattern);
  return { key: pattern, length: keyLabels, keyLabels, minExtra: 0 };
}

const byPrecedence = (a: SuffixRule, b: SuffixRule): number => b.length - a.length || Number(b.exclude) - Number(a.exclude) || b.keyLabels - a.keyLabels;

export class SuffixIndex {
  private readonly byKey = new Map<string, SuffixRule[]>();
  /** Keys holding each route's dynamic rules, so replacing them touches only those. */
  private readonly dynamicKeys = new Map<number, Set<string>>();

  /** `describe(route)` names a route in conflict messages ("prod (config.yaml:4)"). */
  constructor(private readonly describe: (route: number) => string) {}

  add(key: string, rule: SuffixRule): void {
    let rules = this.byKey.get(key);
    if (!rules) {
      rules = [];
      this.byKey.set(key, rules);
    }
    if (!rule.dynamic && !rule.exclude) {
      const clash = rules.find(
        (r) =>
          !r.dynamic &&
          !r.exclude &&
          r.route !== rule.route &&
          r.length === rule.length &&
          r.minExtra <= rule.maxExtra &&
          rule.minExtra <= r.maxExtra &&
          !excludedOverlap(rules, r, rule),
      );
      if (clash) {
        throw new RoutingTableError(
          `routes ${this.describe(clash.route)} and ${this.describe(rule.route)} both claim "${rule.pattern}"` +
            `${clash.pattern !== rule.pattern ? ` (as "${clash.pattern}")` : ''}: give it to one of them, or exclude it from the other`,
        );
      }
    }
    rules.push(rule);
    rules.sort(byPrecedence);
    if (rule.dynamic) {
      let keys = this.dynamicKeys.get(rule.route);
      if (!keys) this.dynamicKeys.set(rule.route, (keys = new Set()));
      keys.add(key);
    }
  }

  /** Drops a route's dynamic rules (before adding the new set). */
  removeDynamic(route: number): void {
    for (const key of this.dynamicKeys.get(route) ?? []) {
      const kept = (this.byKey.get(key) ?? []).filter((r) => !(r.dynamic && r.route === route));
      if (kept.length === 0) this.byKey.delete(key);
      else this.byKey.set(key, kept);
    }
    this.dynamicKeys.delete(route);
  }

  /**
   * The rules that apply to a normalized name with `labels` labels, in precedence order. Probes
   * the whole name, each shorter suffix, then the root: labels + 1 map look-ups.
   */
  candidates(name: string, labels: number): SuffixRule[] {
    const out: SuffixRule[] = [];
    let pos = 0;
    let keyLabels = labels;
    for (;;) {
      const rules = this.byKey.get(pos === 0 ? name : name.slice(pos));
      if (rules) collect(rules, labels - keyLabels, out);
      if (keyLabels === 0) break;
      const dot = name.indexOf('.', pos);
      pos = dot < 0 ? name.length : dot + 1;
      keyLabels--;
      if (keyLabels === 0) {
        const root = this.byKey.get('');
        if (root) collect(root, labels, out);
        break;
      }
    }
    return out.length > 1 ? out.sort(byPrecedence) : out;
  }

  /** Every key with its rules, for the PAC file and `status`. */
  entries(): IterableIterator<[string, SuffixRule[]]> {
    return this.byKey.entries();
  }
}

/**
 * Whether one of the two routes excludes what both rules would claim: an exclude of that route
 * under the same key, as long or longer (it wins there), covering their overlap. Excludes are
 * added before a route's includes, so they are here when its includes are checked.
 */
function excludedOverlap(rules: readonly SuffixRule[], a: SuffixRule, b: SuffixRule): boolean {
  const lo = Math.max(a.minExtra, b.minExtra);
  const hi = Math.min(a.maxExtra, b.maxExtra);
  return rules.some(
    (e) => e.exclude && !e.dynamic && (e.route === a.route || e.route === b.route) && e.length >= a.length && e.minExtra <= lo && hi <= e.maxExtra,
  );
}

function collect(rules: SuffixRule[], extra: number, out: SuffixRule[]): void {
  for (const r of rules) if (extra >= r.minExtra && extra <= r.maxExtra) out.push(r);
}
