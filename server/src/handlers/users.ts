import type { Handler } from '../http/handler-types.js';
import { presentUser } from '../presenters/account.js';

export const getCurrentUser: Handler<'getCurrentUser'> = async ({ caller }) => ({ status: 200, data: presentUser(caller.user) });
