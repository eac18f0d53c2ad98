/**
 * Password reset: asking for a link for an address no account has (202, the same answer any address
 * gets, and no mail goes anywhere), and the refusals of both steps. Setting a password needs a token
 * from the mail or the operator, which a black-box run has no way to get (coverage.ts says so).
 * Both steps count against this address's sign-up and login limit.
 */
import { randomToken, type CaseDef } from '../case.js';
import { oneRequest, payloadTooLarge, unsupportedMediaType } from './common.js';

const group = 'password reset';
const REQUEST = 'POST /v1/auth/password-reset';
const CONFIRM = 'POST /v1/auth/password-reset/confirm';
const NEW_PASSWORD = 'conformance new password';

export const passwordResetCases: CaseDef[] = [
  {
    group,
    op: REQUEST,
    expect: '202',
    title: 'an address no account has is answered 202, as any address is',
    run: async (t) => {
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/password-reset',
        json: { email: `${t.state.tag}-nobody@example.com` },
      });
      const data = t.expect(exchange, 202);
      t.check(typeof data?.message === 'string' && data.message !== '', 'the 202 carries a message', exchange);
    },
  },
  oneRequest(group, REQUEST, '400 invalid_request', 'an email that is no address is refused, with details', () => ({
    method: 'POST',
    path: '/v1/auth/password-reset',
    json: { email: 'not an address' },
  })),
  unsupportedMediaType(
    group,
    REQUEST,
    () => '/v1/auth/password-reset',
    () => undefined,
  ),
  payloadTooLarge(
    group,
    REQUEST,
    () => '/v1/auth/password-reset',
    () => undefined,
  ),
  oneRequest(group, CONFIRM, '400 invalid_reset_token', 'a token no one was given is refused', () => ({
    method: 'POST',
    path: '/v1/auth/password-reset/confirm',
    json: { token: randomToken('rst_'), new_password: NEW_PASSWORD },
  })),
  oneRequest(group, CONFIRM, '400 invalid_request', 'a body without a new password is refused, with details', () => ({
    method: 'POST',
    path: '/v1/auth/password-reset/confirm',
    json: { token: randomToken('rst_') },
  })),
  unsupportedMediaType(
    group,
    CONFIRM,
    () => '/v1/auth/password-reset/confirm',
    () => undefined,
  ),
  payloadTooLarge(
    group,
    CONFIRM,
    () => '/v1/auth/password-reset/confirm',
    () => undefined,
  ),
];
