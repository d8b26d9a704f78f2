import { render } from 'preact';
import { AgentsPage } from './pages/agents.ts';
import { AuditPage } from './pages/audit.ts';
import { AuthorizePage } from './pages/authorize.ts';
import { DeliveriesPage } from './pages/deliveries.ts';
import { NotificationsPage } from './pages/notifications.ts';
import { OverviewPage } from './pages/overview.ts';
import { signInPage } from './pages/sign-in.ts';
import { ThreadPage } from './pages/thread.ts';
import { ThreadsPage } from './pages/threads.ts';
import { startHeader } from './shared/header.ts';
import { $, html, PAGE } from './shared/html.ts';
import { live } from './shared/live.ts';

// The dashboard's script: the page the server named on <body data-page>, drawn with Preact (keyed
// lists, so that a live update redraws only what changed and leaves an open attempt log open and
// typed text in place). Bundled at start with the modules it imports (src/dashboard/script.ts).
const pages = {
  overview: OverviewPage,
  deliveries: DeliveriesPage,
  threads: ThreadsPage,
  thread: ThreadPage,
  agents: AgentsPage,
  audit: AuditPage,
  notifications: NotificationsPage,
  authorize: AuthorizePage,
};

if (PAGE === 'sign-in') signInPage();
else {
  startHeader();
  const app = $('#app');
  app.textContent = '';
  render(html`<${pages[PAGE as keyof typeof pages]} />`, app);
  // The live view starts whatever the first loads answered: a list that failed to load is read
  // again when the stream is ready.
  live.start();
}
