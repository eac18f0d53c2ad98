import type { Handler } from '../http/handler-types.js';
import { RESET_REQUESTED_MESSAGE } from '../domain/password-reset.js';

/** The same answer, at once, for every address: the work runs after it (domain/password-reset.ts). */
export const requestPasswordReset: Handler<'requestPasswordReset'> = async ({ body, services }) => {
  services.passwordResets.request(body.email);
  return { status: 202, data: { message: RESET_REQUESTED_MESSAGE } };
};

export const confirmPasswordReset: Handler<'confirmPasswordReset'> = async ({ body, em, services }) => {
  await services.passwordResets.confirm(em, body.token, body.new_password);
  return { status: 204 };
};
