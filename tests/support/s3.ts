/**
 * A local S3-compatible server for the tests of ICON_STORE=s3: s3rver, storing in a temporary
 * folder, with a bucket and a key pair of its own (the secret is registered with the harness, so
 * the end-of-run check fails the run should it reach the log or the database), and what the tests
 * read of the bucket directly, through the same SDK the service uses.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import AWSAccount from 's3rver/lib/models/account.js';
import { secret } from './harness.js';

export interface StoredObject {
  bytes: Buffer;
  contentType: string | undefined;
  cacheControl: string | undefined;
}

export interface LocalS3 {
  bucket: string;
  /** The service's settings for ICON_STORE=s3 on this bucket. */
  env: Record<string, string>;
  /** The keys of the bucket's objects, sorted. */
  keys(): Promise<string[]>;
  object(key: string): Promise<StoredObject | undefined>;
  close(): Promise<void>;
}

export async function startLocalS3(): Promise<LocalS3> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'signalboard-s3-'));
  const bucket = `icons-${randomBytes(4).toString('hex')}`;
  const accessKeyId = `AKTEST${randomBytes(6).toString('hex').toUpperCase()}`;
  const secretAccessKey = secret(`s3-secret-${randomBytes(16).toString('hex')}`);
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKeyId, secretAccessKey);
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return {
    bucket,
    env: {
      ICON_STORE: 's3',
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: accessKeyId,
      S3_SECRET_ACCESS_KEY: secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
      S3_TIMEOUT_MS: '2000',
    },
    keys: async () => {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).map((object) => object.Key!).sort();
    },
    object: async (key) => {
      try {
        const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        return {
          bytes: Buffer.from(await answer.Body!.transformToByteArray()),
          contentType: answer.ContentType,
          cacheControl: answer.CacheControl,
        };
      } catch (error) {
        if ((error as Error).name === 'NoSuchKey') return undefined;
        throw error;
      }
    },
    close: async () => {
      client.destroy();
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
