/** Every operation of the contract, by operationId: an operation added to the contract without its handler does not compile. */
import type { Handlers } from '../http/handler-types.js';
import { createApiToken, deleteApiToken, listApiTokens, login, logout, signup } from './auth.js';
import { getHealth, getOpenApi, getReadiness, getRoot } from './meta.js';
import {
  changeEmail,
  changePassword,
  confirmEmailChange,
  deleteCurrentUser,
  getCurrentUser,
  revertEmailChange,
  updateCurrentUser,
} from './users.js';
import { listActivity } from './activity.js';
import { createCheckoutSession, createPortalSession, stripeWebhook } from './billing.js';
import { countEvents, listEvents, publishEvent, publishEvents, streamEvents } from './events.js';
import { getEndUser, identifyEndUser } from './end-users.js';
import { createFeed, deleteFeed, listFeeds, updateFeed } from './feeds.js';
import { createInsight, deleteInsight, listInsights, updateInsight } from './insights.js';
import { acceptInvite, createInvite, deleteInvite, listInvites, listReceivedInvites } from './invites.js';
import { logsnagIdentify, logsnagIncrementInsight, logsnagLog, logsnagSetInsight } from './logsnag.js';
import { removeMember } from './members.js';
import { confirmPasswordReset, requestPasswordReset } from './password-reset.js';
import { createProject, deleteProject, getProject, listProjects, transferOwnership, updateProject } from './projects.js';
import { deleteSession, listSessions } from './sessions.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhookDeliveries,
  listWebhooks,
  recoverWebhook,
  retryWebhookDelivery,
  rotateWebhookSecret,
  testWebhook,
  updateWebhook,
} from './webhook-routes.js';

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
  listReceivedInvites,
  createProject,
  listProjects,
  getProject,
  updateProject,
  deleteProject,
  removeMember,
  createInvite,
  listInvites,
  acceptInvite,
  deleteInvite,
  createInsight,
  listInsights,
  updateInsight,
  deleteInsight,
  listActivity,
  listFeeds,
  createFeed,
  updateFeed,
  deleteFeed,
  publishEvent,
  publishEvents,
  listEvents,
  streamEvents,
  countEvents,
  identifyEndUser,
  getEndUser,
  stripeWebhook,
  createCheckoutSession,
  createPortalSession,
  deleteCurrentUser,
  transferOwnership,
  requestPasswordReset,
  confirmPasswordReset,
  updateCurrentUser,
  changePassword,
  listSessions,
  deleteSession,
  changeEmail,
  confirmEmailChange,
  revertEmailChange,
  logsnagLog,
  logsnagSetInsight,
  logsnagIncrementInsight,
  logsnagIdentify,
  listWebhooks,
  createWebhook,
  getWebhook,
  updateWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  testWebhook,
  listWebhookDeliveries,
  retryWebhookDelivery,
  recoverWebhook,
};
