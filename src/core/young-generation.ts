// Keeps V8's young generation at its start size while a cache (re)lists a big cluster.
//
// A sync keeps most of what it parses (high survival), so V8 doubles the young generation at
// each scavenge up to 16 MiB per semi-space (V8 src/heap/new-spaces.cc, Grow, by
// --semi-space-growth-factor). Scavenges then come rarely, and the socket reads' and TLS
// records' backing stores (malloc'd, freed only when a scavenge finds their Buffer dead) pile up
// meanwhile: glibc keeps that high-water mark in its heap for good. Measured against the real
// API server at 10,000 pods, glibc's heap above an empty cluster 3 s after the sync: +4 MiB, +2.5
// with the factor at 1.
// The flag is read at each growth decision, so setting it at run time takes effect at once (as
// the GC guard's flags do, core/gc-guard.ts); the young generation grows again once no sync runs.
import v8 from 'node:v8';

const GROWTH_FACTOR_FLAG = '--semi-space-growth-factor';
/** V8's default (flag-definitions.h). */
const DEFAULT_GROWTH_FACTOR = 2;

/** Whoever started node with their own young-generation sizing keeps it. */
function sizedByUser(): boolean {
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' ');
  return /--(semi-space-growth-factor|max-semi-space-size|min-semi-space-size)\b/.test(given);
}

export interface YoungGenerationHooks {
  setV8Flags(flags: string): void;
  sizedByUser(): boolean;
}

const realHooks: YoungGenerationHooks = { setV8Flags: (flags) => v8.setFlagsFromString(flags), sizedByUser };

/** Counts the syncs under way; the first sets the factor to 1, the last one done sets it back. */
export class YoungGenerationHold {
  private holds = 0;
  private readonly enabled: boolean;

  constructor(private readonly hooks: YoungGenerationHooks = realHooks) {
    this.enabled = !hooks.sizedByUser();
  }

  get held(): boolean {
    return this.holds > 0;
  }

  /** Holds until the returned function is called (calling it again does nothing). */
  hold(): () => void {
    if (!this.enabled) return () => undefined;
    if (this.holds++ === 0) this.hooks.setV8Flags(`${GROWTH_FACTOR_FLAG}=1`);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds === 0) this.hooks.setV8Flags(`${GROWTH_FACTOR_FLAG}=${DEFAULT_GROWTH_FACTOR}`);
    };
  }
}

/** The process's one hold (every guest cluster's informers share the heap). */
export const youngGenerationHold = new YoungGenerationHold();
