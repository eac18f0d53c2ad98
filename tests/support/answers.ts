/** Assertions on raw answers, shared by the account and token tests. */
import { createHash } from 'node:crypto';
import { expect } from 'chai';

export const DAY_MS = 86_400_000;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export interface Answer {
  status: number;
  headers: Headers;
  json: any;
  text?: string;
}

export function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
/** A failure envelope with exactly `{ code, message }` (plus `details` for invalid_request). */
export function expectFailure(answer: Answer, status: number, code: string): void {
  expect(answer.status, JSON.stringify(answer.json)).to.equal(status);
  expect(answer.json).to.have.all.keys('success', 'error');
  expect(answer.json.success).to.equal(false);
  expect(answer.json.error.code).to.equal(code);
  expect(answer.json.error.message).to.be.a('string').and.not.be.empty;
  if (code === 'invalid_request') {
    expect(answer.json.error).to.have.all.keys('code', 'message', 'details');
    expect(answer.json.error.details).to.be.an('array').that.is.not.empty;
    for (const detail of answer.json.error.details) {
      expect(detail).to.have.all.keys('path', 'message');
      expect(detail.path).to.be.a('string');
      expect(detail.message).to.be.a('string').and.not.be.empty;
    }
  } else {
    expect(answer.json.error).to.have.all.keys('code', 'message');
  }
  if (status === 401) expect(answer.headers.get('www-authenticate')).to.equal('Bearer');
}
/** 400 invalid_request whose details all point at `path`. */
export function expectInvalid(answer: Answer, path: string): void {
  expectFailure(answer, 400, 'invalid_request');
  const paths = [...new Set(answer.json.error.details.map((d: { path: string }) => d.path))];
  expect(paths, JSON.stringify(answer.json.error.details)).to.deep.equal([path]);
}
export function expectCloseTo(actual: Date | string, expected: number, toleranceMs: number, what: string): void {
  const at = new Date(actual).getTime();
  expect(Number.isNaN(at), `${what} is a time`).to.equal(false);
  expect(Math.abs(at - expected), `${what}: ${new Date(actual).toISOString()} vs ${new Date(expected).toISOString()}`).to.be.at.most(toleranceMs);
}
