/*
 * The composer and the run's actions: send (Enter; Shift+Enter is a new line), the optimistic
 * bubble, send a queued message now, recall it, Stop, Continue, approve or deny, the view mode
 * and "Load earlier messages".
 */
import { sessionPath } from "./api.js";
import { renderHitl, renderPending } from "./cards.js";
import { gettext } from "./i18n.js";
import { renderTranscript } from "./transcript.js";

function pageContext() {
  return { url: window.location.href, title: document.title };
}

/** Uses the store's functions on app, app.attachments, app.runner, app.pollSoon, app.setError,
 * app.clearError, app.renderSession, app.createSession. */
export function createComposer(app) {
  const { client, ui } = app;
  const { api } = client;

  async function postMessage(s, content, attached) {
    app.runner.claim(s.id, true); // the user is on this page now: its window runs the page tools
    const local = { localId: "local_u_" + Date.now(), content, afterSeq: app.lastSeq(s) };
    // The composer's uploads (true), or the attachments of a recalled queued message.
    const files = attached === true ? app.attachments.uploaded(s) : attached || [];
    const ids = files.map((item) => item.id);
    if (ids.length) local.attachments = files;
    s.localMessages.push(local);
    s.versions = {}; // a message continues the current conversation: it shows again
    app.renderSession();
    app.pollSoon(s); // poll right after a send, even if a raced poll says idle
    const body = { content, pageContext: pageContext() };
    if (ids.length) body.attachments = ids;
    const result = await api("POST", sessionPath(s.id, "messages"), body);
    if (result.ok && attached === true) app.attachments.sent(s);
    if (!result.ok) {
      s.localMessages = s.localMessages.filter((m) => m !== local);
      app.setError(s, result.data);
      app.renderSession();
      return false;
    }
    app.applyPayload(s, result.data, result.etag);
    app.pollSoon(s);
    return true;
  }

  async function send() {
    const content = ui.input.value.trim();
    const existing = app.activeSession();
    if (existing && existing.editing) {
      // Editing the last message (reply_actions.js): Send resends it through the edit route.
      app.clearError();
      if (content) await app.sendEdit(existing, content);
      return;
    }
    if (existing && app.attachments.uploading(existing)) {
      app.setError(existing, {
        code: "ahentic_uploading",
        detail: gettext("Wait for the files to upload."),
      });
      return;
    }
    if (!content && !(existing && app.attachments.ids(existing).length)) return;
    app.clearError();
    const s = existing && !app.isReadOnly(existing) ? existing : await app.createSession();
    if (!s) return;
    ui.input.value = "";
    if (!(await postMessage(s, content, true)) && !ui.input.value) {
      ui.input.value = content; // give the text back to fix and resend
    }
  }

  /** A message left queued after Stop: take it out of the queue and send it as a new turn. */
  async function sendNow(s, item) {
    app.clearError();
    s.recalled.add(item.id);
    renderPending(app, s);
    const result = await api("DELETE", sessionPath(s.id, "pending-messages/" + item.id));
    if (!result.ok) {
      s.recalled.delete(item.id);
      app.setError(s, result.data); // 404: it was already sent to the agent
      app.pollSoon(s);
      return;
    }
    await postMessage(s, item.content.trim(), item.attachments || []);
  }

  async function stop() {
    const s = app.activeSession();
    if (!s) return;
    // Stop shows idle at once and drops browser results still being posted.
    s.stopping = true;
    s.stoppedAt = Date.now();
    app.renderSession();
    // The streamed reply stays as it is on screen (pollLive no longer grows it while Stop is
    // on its way): the server keeps that much of it, not what the model streamed after.
    const shown = s.live && s.live.text;
    const result = await api("POST", sessionPath(s.id, "cancel"), shown ? { shown } : {});
    s.stopping = false;
    if (result.ok) app.applyPayload(s, result.data, result.etag);
    else app.setError(s, result.data);
    app.renderSession();
    app.pollSoon(s);
  }

  async function continueRun(s) {
    app.clearError();
    app.runner.claim(s.id, true);
    const result = await api("POST", sessionPath(s.id, "continue"), {});
    if (result.ok) app.applyPayload(s, result.data, result.etag);
    else app.setError(s, result.data);
    app.pollSoon(s);
  }

  async function decide(s, decision, reason) {
    const pendingTool = s.payload && s.payload.pendingTool;
    if (!pendingTool) return;
    app.clearError();
    app.runner.claim(s.id, true);
    s.approving = pendingTool.callId;
    renderHitl(app, s);
    const body = { decision };
    if (decision === "deny" && reason) body.reason = reason;
    app.pollSoon(s);
    const result = await api("POST", sessionPath(s.id, "approvals"), body);
    s.approving = null;
    if (result.ok) app.applyPayload(s, result.data, result.etag);
    else if (result.status !== 409) app.setError(s, result.data); // 409: decided elsewhere
    app.renderSession();
    app.pollSoon(s);
  }

  async function recall(s, pendingId) {
    app.clearError();
    s.recalled.add(pendingId);
    renderPending(app, s);
    const result = await api("DELETE", sessionPath(s.id, "pending-messages/" + pendingId));
    if (!result.ok) {
      s.recalled.delete(pendingId);
      app.setError(s, result.data); // 404: it was already sent to the agent
    }
    app.pollSoon(s);
  }

  // Quick changes (arrow keys across the view switch) go one at a time, the last one winning:
  // two PATCHes in flight could be applied in either order.
  const viewModeWanted = new Map(); // session id -> the mode asked for last, while one is sent

  async function changeViewMode(viewMode) {
    const s = app.activeSession();
    if (!s) return;
    const sending = viewModeWanted.has(s.id);
    viewModeWanted.set(s.id, viewMode);
    if (sending) return;
    try {
      let sent = null;
      while (viewModeWanted.get(s.id) !== sent) {
        sent = viewModeWanted.get(s.id);
        const result = await api("PATCH", sessionPath(s.id), { viewMode: sent });
        if (!result.ok) {
          app.setError(s, result.data);
          break;
        }
        app.applyPayload(s, result.data, result.etag);
      }
    } finally {
      viewModeWanted.delete(s.id);
    }
  }

  async function loadEarlier(s) {
    const oldest = s.older.length ? s.older[0] : s.payload.messages[0];
    if (!oldest) return;
    const query =
      "?before=" + oldest.seq + "&limit=50&view=" + encodeURIComponent(s.payload.viewMode);
    const result = await api("GET", sessionPath(s.id, "messages") + query);
    if (!result.ok) {
      app.setError(s, result.data);
      return;
    }
    s.older = result.data.messages.concat(s.older);
    s.olderHasMore = result.data.hasMore;
    renderTranscript(app, s, { keepScroll: true });
  }

  function wire() {
    ui.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      send();
    });
    ui.input.addEventListener("keydown", (event) => {
      // Enter sends, Shift+Enter is a newline; never send in the middle of an IME composition.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    });
    ui.stop.addEventListener("click", stop);
    app.attachments.wire();
  }

  return { decide, recall, sendNow, stop, continueRun, loadEarlier, changeViewMode, wire };
}
