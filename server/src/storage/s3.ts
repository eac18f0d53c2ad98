/**
 * Icons in an S3-compatible bucket (ICON_STORE=s3): `icons/<sha256>.png`, so that a bucket served
 * publicly (or a CDN in front of it) can be `CDN_URL` as it is, with the content type and the
 * immutable caching the service's own `/cdn` answers with.
 *
 * Every call is bounded by `timeoutMs` as a whole (connecting, retries, reading the answer): past
 * it the call is aborted. A failure is 503 `unavailable`, logged with its kind and HTTP status
 * only: never a message, which could carry a request's details, and never the credentials.
 * The SDK is loaded only when this store is chosen.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { S3Settings } from '../config.js';
import { Unavailable } from '../errors.js';
import type { Icon, IconBucket } from './icons.js';

/** S3 deletes at most this many keys per request. */
const DELETE_BATCH = 1_000;

type Sdk = typeof import('@aws-sdk/client-s3');

/** What an SDK error says about itself, without its message. */
interface S3Failure {
  name?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
}

/** Where in the bucket an icon lives. */
function objectKey(sha256: string): string {
  return `icons/${sha256}.png`;
}

class Timeout extends Error {
  override name = 'TimeoutError';
}

export class S3Bucket implements IconBucket {
  private constructor(
    private readonly sdk: Sdk,
    private readonly client: S3Client,
    private readonly settings: S3Settings,
    private readonly logger: Logger,
  ) {}

  static async open(settings: S3Settings, logger: Logger): Promise<S3Bucket> {
    const sdk = await import('@aws-sdk/client-s3');
    const client = new sdk.S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.forcePathStyle,
      // Unset: the SDK's own chain (AWS_* variables, a profile, an instance or task role).
      ...(settings.credentials ? { credentials: settings.credentials } : {}),
      maxAttempts: 3,
      requestHandler: { connectionTimeout: settings.timeoutMs, requestTimeout: settings.timeoutMs },
      // Checksums only where S3 requires them (DeleteObjects): some S3-compatible services refuse
      // the newer trailing checksums the SDK would otherwise add to every upload.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    return new S3Bucket(sdk, client, settings, logger);
  }

  async put(icon: Icon): Promise<void> {
    const command = new this.sdk.PutObjectCommand({
      Bucket: this.settings.bucket,
      Key: objectKey(icon.sha256),
      Body: icon.bytes,
      ContentType: 'image/png',
      CacheControl: 'public, max-age=31536000, immutable',
    });
    await this.call('put', 'The icon could not be stored right now; nothing was changed. Retry later.', 30, (abortSignal) =>
      this.client.send(command, { abortSignal }),
    );
  }

  async get(key: string): Promise<Buffer | undefined> {
    const command = new this.sdk.GetObjectCommand({ Bucket: this.settings.bucket, Key: objectKey(key) });
    return this.call('get', 'The icon could not be read right now; retry later.', 5, async (abortSignal) => {
      try {
        const answer = await this.client.send(command, { abortSignal });
        return Buffer.from(await answer.Body!.transformToByteArray());
      } catch (error) {
        if (isMissingKey(error)) return undefined;
        throw error;
      }
    });
  }

  async delete(keys: string[]): Promise<void> {
    for (let at = 0; at < keys.length; at += DELETE_BATCH) {
      const objects = keys.slice(at, at + DELETE_BATCH).map((key) => ({ Key: objectKey(key) }));
      const command = new this.sdk.DeleteObjectsCommand({ Bucket: this.settings.bucket, Delete: { Objects: objects, Quiet: true } });
      await this.call('delete', 'Icons could not be removed right now.', 60, async (abortSignal) => {
        const answer = await this.client.send(command, { abortSignal });
        // Quiet: only the keys that failed are listed. A key that was not there is no failure.
        const failed = answer.Errors?.length ?? 0;
        if (failed > 0)
          throw Object.assign(new Error(`${failed} object(s) not deleted`), { name: 'PartialDelete', Code: answer.Errors![0]!.Code });
      });
    }
  }

  /** Runs one call under the deadline; any failure is logged and becomes 503 with `message`. */
  private async call<T>(operation: string, message: string, retryAfter: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new Timeout());
      }, this.settings.timeoutMs);
    });
    try {
      // Raced as well as aborted: whatever part of the call does not heed the signal, the caller waits no longer.
      return await Promise.race([work(controller.signal), deadline]);
    } catch (error) {
      const failure = error as S3Failure;
      const err = { type: failure.name, code: failure.Code, status: failure.$metadata?.httpStatusCode };
      this.logger.warn({ err, operation, bucket: this.settings.bucket }, 'icon bucket call failed');
      throw new Unavailable(message, retryAfter);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The bucket answered that it has no such object (a missing bucket is a failure, not a missing icon). */
function isMissingKey(error: unknown): boolean {
  const failure = error as S3Failure;
  return failure.name === 'NoSuchKey' || (failure.$metadata?.httpStatusCode === 404 && failure.name !== 'NoSuchBucket');
}
