// The doctor's POSTs (SelfSubjectAccessReview, SelfSubjectRulesReview): the answer is read within
// the request timeout and up to a bound, as getJson reads (cluster/api.ts). A server that sends
// without end (or a gzip bomb) must not take all memory, nor one that trickles hold the doctor for ever.
import http from 'node:http';
import https from 'node:https';
import { ApiStatusError, statusMessage, type ApiConnection } from '../cluster/api.js';
import { untilSocket } from '../cluster/socket-wait.js';
import { notJsonMessage, redirectMessage } from '../cluster/foreign-answer.js';
import { readBoundedBody } from '../cluster/bounded-body.js';
import { boundRequest } from '../cluster/request-deadline.js';

/** A review's answer is a few KiB; a rules review lists every rule of the user's roles. */
export const REVIEW_ANSWER_MAX = 8 * 1024 * 1024;
const ERROR_ANSWER_MAX = 64 * 1024;

export async function postJson<T>(api: Pick<ApiConnection, 'requestOptions' | 'url'>, path: string, body: unknown, timeoutMs: number): Promise<T> {
  const options = await api.requestOptions();
  const url = api.url(path);
  const text = JSON.stringify(body);
  const client = url.protocol === 'http:' ? http : https;
  const timedOut = () => new Error(`API request timed out after ${timeoutMs} ms`);
  return new Promise<T>((resolve, reject) => {
    // The whole answer, body included, within the timeout (as kubectl's --request-timeout).
    const whole = setTimeout(() => {
      req.destroy();
      reject(timedOut());
    }, timeoutMs);
    whole.unref();
    const settle = (f: () => void) => {
      clearTimeout(whole);
      f();
    };
    const req = client.request(
      url,
      {
        ...options,
        method: 'POST',
        headers: { ...options.headers, Accept: 'application/json', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(text)) },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        readBoundedBody(req, res, path, { ok: REVIEW_ANSWER_MAX, error: ERROR_ANSWER_MAX }, (read) => {
          if ('failed' in read) return settle(() => reject(read.failed));
          if ('refused' in read) return settle(() => reject(new ApiStatusError(status, read.refused)));
          if (status < 200 || status >= 300)
            return settle(() =>
              reject(new ApiStatusError(status, redirectMessage(status, res.headers.location) ?? statusMessage(read.text) ?? `HTTP ${status}`)),
            );
          try {
            const parsed = JSON.parse(read.text) as T;
            settle(() => resolve(parsed));
          } catch {
            settle(() => reject(new ApiStatusError(status, notJsonMessage(path, read.text))));
          }
        });
      },
    );
    boundRequest(req, timeoutMs, timedOut);
    untilSocket(req, timeoutMs, () => settle(() => reject(timedOut())));
    req.on('error', (err) => settle(() => reject(err)));
    req.end(text);
  });
}
