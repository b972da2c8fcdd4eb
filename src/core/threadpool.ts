// libuv's threadpool size, which decides how many name look-ups run at once. The bin script and
// the bundle's banner start the pool at 16 threads when the environment does not size it, then
// take UV_THREADPOOL_SIZE back (bin/kubectl-proxyout, sizeThreadpool): they leave the size here.

/**
 * The size they start it at: name look-ups take at most half of it, and a direct route's leave two
 * of those to the rest (routes/direct/lookup-slots.ts). Libuv's default 4 threads let a direct
 * route look up one name at a time all day; 16 let it look up six.
 */
export const PROGRAM_THREADPOOL_SIZE = 16;

/** The threads libuv's pool runs in this process. */
export function threadpoolSize(platform: NodeJS.Platform = process.platform): number {
  const started = (globalThis as { __proxyoutThreadpool?: unknown }).__proxyoutThreadpool;
  // On Windows libuv reads the C runtime's copy of the environment, which process.env does not
  // change (libuv#4887): a size set in-process never took there.
  if (typeof started === 'number' && platform !== 'win32') return started;
  const n = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(n) && n >= 1 ? Math.min(n, 1024) : 4;
}
