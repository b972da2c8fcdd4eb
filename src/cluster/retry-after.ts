// Waiting out what the API server asks with Retry-After (a 429 of API priority and fairness, a
// 5xx while its watch cache fills), as client-go's rest client does for every request
// (staging/src/k8s.io/client-go/rest/request.go checkWait, maxRetries 10).
import { setTimeout as delay } from 'node:timers/promises';
import { ApiStatusError } from './api.js';

/** Retries of one request that the server asked to wait. */
export const MAX_RETRY_AFTER_RETRIES = 10;
/** A Retry-After longer than this is waited no longer (the caller's own deadline may cut it sooner). */
const MAX_RETRY_AFTER_S = 30;

/**
 * Runs `attempt` again after the wait a 429 or 5xx asks for with Retry-After. Without
 * Retry-After, after the last retry, or once `signal` aborts, the server's answer is the error.
 */
export async function honouringRetryAfter<T>(
  signal: AbortSignal | undefined,
  attempt: () => Promise<T>,
  /** Before each wait, with the answer and the seconds waited. */
  onWait?: (err: ApiStatusError, seconds: number) => void,
): Promise<T> {
  for (let retries = 0; ; retries++) {
    try {
      return await attempt();
    } catch (err) {
      const asked = err instanceof ApiStatusError && (err.statusCode === 429 || err.statusCode >= 500) ? err.retryAfterSeconds : undefined;
      if (asked === undefined || retries >= MAX_RETRY_AFTER_RETRIES || signal?.aborted) throw err;
      const seconds = Math.min(asked, MAX_RETRY_AFTER_S);
      onWait?.(err as ApiStatusError, seconds);
      await delay(seconds * 1000, undefined, signal ? { signal } : {}).catch(() => {
        throw err;
      });
    }
  }
}
