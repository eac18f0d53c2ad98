/**
 * The two links of an e-mail change, both public: `POST /v1/auth/email-confirm` (the `emc_…` token
 * mailed to the new address) and `POST /v1/auth/email-revert` (the `emr_…` token mailed to the old
 * one). A black-box run reads no mail, so it checks their refusals only: a well-formed token no one
 * was given (with or without a made-up bearer token, which these routes ignore), a body without a
 * token, a body that is not JSON or is too large. Their 204 and 409
 * need a live token (coverage.ts says so). Both count against this address's sign-up and login
 * limit, as logins do.
 */
import { randomToken, type CaseDef } from '../case.js';
import { oneRequest, payloadTooLarge, unsupportedMediaType } from './common.js';

const group = 'email change';

const LINKS = [
  { op: 'POST /v1/auth/email-confirm', path: '/v1/auth/email-confirm', prefix: 'emc_', what: 'confirmation' },
  { op: 'POST /v1/auth/email-revert', path: '/v1/auth/email-revert', prefix: 'emr_', what: 'undo' },
] as const;

export const emailChangeCases: CaseDef[] = LINKS.flatMap(({ op, path, prefix, what }): CaseDef[] => [
  oneRequest(group, op, '400 invalid_email_token', `a well-formed ${what} token (${prefix}…) no one was given is refused`, () => ({
    method: 'POST',
    path,
    json: { token: randomToken(prefix) },
  })),
  oneRequest(
    group,
    op,
    '400 invalid_email_token',
    'the route ignores Authorization: with a made-up bearer token too, the answer is about the link token, not 401',
    () => ({ method: 'POST', path, token: randomToken(), json: { token: `${prefix}${'A'.repeat(43)}` } }),
  ),
  oneRequest(group, op, '400 invalid_request', 'a body without a token is refused, with details', () => ({
    method: 'POST',
    path,
    json: {},
  })),
  unsupportedMediaType(
    group,
    op,
    () => path,
    () => undefined,
  ),
  payloadTooLarge(
    group,
    op,
    () => path,
    () => undefined,
  ),
]);
