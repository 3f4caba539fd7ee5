/*
 * Polling: the poll loop's hooks for the sidebar (api.js runs the loop) and the live text of the
 * reply the model is streaming.
 */
import { createPoller, sessionPath } from "./api.js";
import { renderBanner } from "./cards.js";
import { gettext } from "./i18n.js";
import { renderTranscript } from "./transcript.js";

export function createPolling(app) {
  const { config, client, state } = app;

  const poller = createPoller(config, client, {
    isOpen: (s) => app.isOpen(s),
    isActive: (s) => s.id === state.active,
    onPayload(s, payload, etag) {
      app.applyPayload(s, payload, etag);
      if (s.error && s.error.fromPoll) app.setError(s, null);
    },
    onNotModified(s) {
      // Nothing changed, but time-based duties (stall nudge, "may be stuck") still advance.
      if (s.payload) app.actAsRunner(s);
      if (s.id === state.active) renderBanner(app, s);
    },
    onGone(s) {
      app.closeTab(s.id);
      app.setError(null, {
        code: "ahentic_session_not_found",
        detail: gettext("That chat no longer exists."),
      });
    },
    onError(s, data) {
      app.setError(s, Object.assign({ fromPoll: true }, data));
    },
  });

  /** The reply the model is streaming (GET sessions/{id}/live), for the shown chat only and
   * only while it runs: an idle chat costs no extra request. The text is shown as it grows and
   * gives way to the reply's message when the session's next version arrives. */
  async function pollLive() {
    const s = app.activeSession();
    const p = s && s.payload;
    // Stop freezes the text on screen (composer.js sends it with the cancel).
    if (!p || p.status !== "running" || s.livePolling || s.stopping) return;
    s.livePolling = true;
    const result = await client.api("GET", sessionPath(s.id, "live"));
    s.livePolling = false;
    if (!result.ok || !s.payload || s.payload.status !== "running" || s.stopping) return;
    const text = result.data.run === s.payload.runSeq ? result.data.text : "";
    if (text === ((s.live && s.live.text) || "")) return;
    s.live = text ? { text } : null;
    if (s.id === state.active) renderTranscript(app, s);
  }

  return {
    /** Poll a chat after `ms` (0: now). */
    schedule: poller.schedule,
    /** Poll fast for a while: an action was just posted. */
    pollSoon: poller.soon,
    pollLive,
  };
}
