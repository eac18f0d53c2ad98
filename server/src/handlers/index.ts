/**
 * Every operation of the contract, by operationId. Operations whose issue has not landed answer
 * 501 `not_implemented` through `notImplemented`, so the table is complete and the compiler checks it.
 */
import { notImplemented } from '../http/dispatch.js';
import type { Handlers } from '../http/handler-types.js';
import { createApiToken, deleteApiToken, listApiTokens, login, logout, signup } from './auth.js';
import { getHealth, getOpenApi, getReadiness, getRoot } from './meta.js';
import { getCurrentUser } from './users.js';

export const handlers: Handlers = {
  getRoot,
  getOpenApi,
  getHealth,
  getReadiness,
  signup,
  login,
  logout,
  createApiToken,
  listApiTokens,
  deleteApiToken,
  getCurrentUser,
  listReceivedInvites: notImplemented,
  createProject: notImplemented,
  listProjects: notImplemented,
  getProject: notImplemented,
  updateProject: notImplemented,
  deleteProject: notImplemented,
  removeMember: notImplemented,
  createInvite: notImplemented,
  listInvites: notImplemented,
  acceptInvite: notImplemented,
  deleteInvite: notImplemented,
  createInsight: notImplemented,
  listInsights: notImplemented,
  updateInsight: notImplemented,
  deleteInsight: notImplemented,
  listActivity: notImplemented,
  listFeeds: notImplemented,
  createFeed: notImplemented,
  updateFeed: notImplemented,
  deleteFeed: notImplemented,
  publishEvent: notImplemented,
  listEvents: notImplemented,
  streamEvents: notImplemented,
  stripeWebhook: notImplemented,
};
