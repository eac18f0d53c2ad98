/** Every operation of the contract, by operationId: an operation added to the contract without its handler does not compile. */
import type { Handlers } from '../http/handler-types.js';
import { createApiToken, deleteApiToken, listApiTokens, login, logout, signup } from './auth-routes.js';
import { getHealth, getOpenApi, getReadiness, getRoot } from './meta-routes.js';
import {
  changeEmail,
  changePassword,
  confirmEmailChange,
  deleteCurrentUser,
  getCurrentUser,
  revertEmailChange,
  updateCurrentUser,
} from './users-routes.js';
import { listActivity } from './activity-routes.js';
import { createCheckoutSession, createPortalSession, stripeWebhook } from './billing-routes.js';
import { countEvents, listEvents, publishEvent, publishEvents, streamEvents } from './events-routes.js';
import { getEndUser, identifyEndUser } from './end-users-routes.js';
import { createFeed, deleteFeed, listFeeds, updateFeed } from './feeds-routes.js';
import { createInsight, deleteInsight, listInsights, updateInsight } from './insights-routes.js';
import { acceptInvite, createInvite, deleteInvite, listInvites, listReceivedInvites } from './invites-routes.js';
import { logsnagIdentify, logsnagIncrementInsight, logsnagLog, logsnagSetInsight } from './logsnag-routes.js';
import { removeMember } from './members-routes.js';
import { confirmPasswordReset, requestPasswordReset } from './password-reset-routes.js';
import { createProject, deleteProject, getProject, listProjects, transferOwnership, updateProject } from './projects-routes.js';
import { deleteSession, listSessions } from './sessions-routes.js';
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
