import type { Handler } from '../http/handler-types.js';
import { EMAIL_CHANGE_REQUESTED_MESSAGE } from '../domain/email-change.js';
import { presentUser } from '../presenters/account-presenters.js';

export const getCurrentUser: Handler<'getCurrentUser'> = async ({ caller, services }) => ({
  status: 200,
  data: presentUser(caller.user, services.icons),
});

export const updateCurrentUser: Handler<'updateCurrentUser'> = async ({ body, caller, em, services }) => {
  const user = await services.accounts.update({ em, caller }, body);
  return { status: 200, data: presentUser(user, services.icons) };
};

export const changeEmail: Handler<'changeEmail'> = async ({ body, caller, em, services }) => {
  await services.accounts.confirmPassword(caller.user, body.current_password);
  await services.emailChanges.request({ em, caller }, body.email);
  return { status: 202, data: { message: EMAIL_CHANGE_REQUESTED_MESSAGE } };
};

export const confirmEmailChange: Handler<'confirmEmailChange'> = async ({ body, em, services }) => {
  await services.emailChanges.confirm(em, body.token);
  return { status: 204 };
};

export const revertEmailChange: Handler<'revertEmailChange'> = async ({ body, em, services }) => {
  await services.emailChanges.revert(em, body.token);
  return { status: 204 };
};

export const changePassword: Handler<'changePassword'> = async ({ body, caller, em, services }) => {
  await services.accounts.changePassword({ em, caller }, body.current_password, body.new_password);
  return { status: 204 };
};

export const deleteCurrentUser: Handler<'deleteCurrentUser'> = async ({ body, caller, em, services }) => {
  await services.accounts.delete({ em, caller }, body.password);
  return { status: 204 };
};
