import type { Handler } from '../http/handler-types.js';
import { updateAccount } from '../domain/accounts.js';
import { presentUser } from '../presenters/account.js';

export const getCurrentUser: Handler<'getCurrentUser'> = async ({ caller, services }) => ({
  status: 200,
  data: presentUser(caller.user, services.icons),
});

export const updateCurrentUser: Handler<'updateCurrentUser'> = async ({ body, caller, em, services }) => {
  const user = await updateAccount(em, services.icons, caller.user, body);
  return { status: 200, data: presentUser(user, services.icons) };
};

export const changePassword: Handler<'changePassword'> = async ({ body, caller, em, services }) => {
  const ended = await services.accounts.changePassword(em, caller.user, caller.credentialId, body.current_password, body.new_password);
  for (const credentialId of ended) services.announce({ kind: 'credential-ended', credentialId }); // their event streams end at once
  return { status: 204 };
};
