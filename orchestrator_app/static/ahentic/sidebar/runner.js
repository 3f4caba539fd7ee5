/*
 * The runner's duties: the window that holds a chat's runner claim (browser_tools.js) runs its
 * page tools and nudges a stalled run; the heartbeat keeps the claims and the time-based UI
 * ("may be stuck", the watching note) current between polls.
 */
import { sessionPath } from "./api.js";
import { createBrowserRunner } from "./browser_tools.js";
import { renderBanner } from "./cards.js";

/** Uses app.runner (the claim), app.applyPayload, app.pollSoon, app.setError, app.isOpen. */
export function createRunnerDuties(app) {
  const { config, client, runner, state } = app;
  const browserRunner = createBrowserRunner(app);

  function actAsRunner(s) {
    const p = s.payload;
    if (!p || !app.tabOf(s.id) || !runner.claim(s.id)) return;
    if (p.status === "awaiting_browser" && p.pendingTool && p.pendingTool.runtime === "browser") {
      browserRunner.run(s, p.pendingTool);
      const paused = client.ageMs(p.browserPausedAt || (p.progress && p.progress.updatedAt));
      if (
        paused != null &&
        paused >= config.browserTimeoutMs &&
        s.nudgedBrowserPause !== p.browserPausedAt
      ) {
        // The tool never answered (the page that should run it is gone): let the server
        // give the model a timeout error instead of waiting forever.
        s.nudgedBrowserPause = p.browserPausedAt;
        nudgeContinue(s);
      }
    } else if (p.status === "running") {
      const quiet = client.ageMs(p.heartbeatAt || p.modifiedAt);
      if (quiet != null && quiet >= config.stallNudgeMs && s.nudgedHeartbeat !== p.heartbeatAt) {
        // Quiet stall nudge: once per heartbeat value; the server re-enqueues the step only
        // when the worker's lease really expired, so an early nudge is harmless.
        s.nudgedHeartbeat = p.heartbeatAt;
        nudgeContinue(s);
      }
    }
  }

  async function nudgeContinue(s) {
    if (s.nudging) return;
    s.nudging = true;
    const result = await client.api("POST", sessionPath(s.id, "continue"), {});
    s.nudging = false;
    if (result.ok) app.applyPayload(s, result.data, result.etag);
  }

  function heartbeat() {
    // Keep (or take over stale) runner claims for every open chat, and keep time-based UI
    // ("may be stuck", the watching note) current between polls.
    for (const tab of state.tabs) runner.claim(tab.id);
    const s = app.activeSession();
    if (s) {
      app.renderStatusLine(s);
      if (s.payload && s.payload.status === "running") renderBanner(app, s);
    }
    app.refreshDiagnosticsWhileLive(s);
  }

  return { actAsRunner, heartbeat };
}
