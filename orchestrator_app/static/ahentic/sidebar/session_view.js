/*
 * The shown chat: renderSession draws every part of the active chat (the cards, the transcript,
 * the panels' parts), plus its error line, the context ring and token count, and the status line
 * (progress label, Stop, "watching").
 */
import { isLive } from "./api.js";
import {
  renderArtifacts,
  renderBanner,
  renderChildren,
  renderHitl,
  renderPending,
  renderPlan,
  waitsForWorker,
} from "./cards.js";
import {
  changed,
  el,
  fill,
  formatNumber,
  formatPercent,
  formatTokens,
  formatUsd,
  shortened,
  show,
} from "./dom.js";
import { gettext } from "./i18n.js";
import { statusOf } from "./tabs.js";
import { renderTranscript } from "./transcript.js";

const STATUS_LINE_LIMIT = 90;

function statusLabel(status) {
  if (status === "running") return gettext("Working…");
  if (status === "awaiting_human") return gettext("Waiting for your approval");
  if (status === "awaiting_browser") return gettext("Running a page tool…");
  return undefined;
}

/** Uses app.agents, app.memory, app.attachments, app.announcer (their render) and
 * app.renderDebugger. */
export function createSessionView(app) {
  const { root, state, ui } = app;

  function renderSession() {
    const s = app.activeSession();
    const p = s && s.payload;
    root.dataset.status = statusOf(app, s);
    app.renderEditing(s);
    app.renderViewMode(p);
    const readOnly = app.isReadOnly(s);
    show(ui.composer, !readOnly);
    show(ui.readOnly, readOnly);
    renderError();
    renderBanner(app, s);
    renderPlan(app, s);
    renderTranscript(app, s);
    renderHitl(app, s);
    app.announcer.render(s);
    renderPending(app, s);
    renderArtifacts(app, s);
    renderChildren(app, s);
    app.agents.render(s);
    app.memory.render(s);
    renderContext(s);
    renderStatusLine(s);
    app.renderDebugger();
    app.attachments.render();
  }

  /** Show an API error ({code, detail}) on a chat's inline error line; null clears it. */
  function setError(s, error) {
    const target = s || app.activeSession();
    if (target) target.error = error;
    else state.error = error; // no chat open yet (creating the first one failed)
    if (!target || target.id === state.active) renderError();
  }

  function clearError() {
    setError(app.activeSession(), null);
  }

  function renderError() {
    const s = app.activeSession();
    const error = s ? s.error : state.error;
    // The stable code is for developers: shown in the Debug view only.
    const debug = !!(s && s.payload && s.payload.viewMode === "debug");
    if (!error) {
      show(ui.error, false);
      fill(ui.error);
      return;
    }
    fill(
      ui.error,
      el("span", { text: error.detail || gettext("Something went wrong.") }),
      error.code && debug
        ? el("code", { className: "ahentic-error-code", text: error.code })
        : null,
      el("button", {
        type: "button",
        className: "ahentic-link",
        "aria-label": gettext("Dismiss the error"),
        text: "×",
        onclick: clearError,
      }),
    );
    show(ui.error, true);
  }

  function renderContext(s) {
    const p = s && s.payload;
    const usage = (p && p.contextUsage) || {};
    const percent = Math.max(0, Math.min(100, Math.round(Number(usage.percent) || 0)));
    ui.ring.style.setProperty("--ahentic-fill", percent + "%");
    ui.ring.dataset.level = percent >= 85 ? "high" : percent >= 60 ? "mid" : "low";
    ui.ring.setAttribute(
      "aria-label",
      gettext("Context %(percent)s full", { percent: formatPercent(percent) }),
    );
    ui.ring.title = p
      ? gettext("Next request: %(used)s of %(budget)s tokens of context", {
          used: formatTokens(usage.usedTokens),
          budget: formatTokens(usage.budgetTokens),
        })
      : "";
    if (!p) {
      ui.tokens.textContent = "";
      return;
    }
    // The context fill (what the next request sends) and the chat's total use are different
    // numbers: say which is which.
    // Tokens are counted when a model call ends: before the first one there is no count to
    // show (not "0 tokens").
    const parts = [gettext("Context %(percent)s", { percent: formatPercent(percent) })];
    if (p.tokensUsed > 0) {
      parts.push(gettext("%(tokens)s tokens this chat", { tokens: formatTokens(p.tokensUsed) }));
    }
    if (p.costUsd != null) parts.push(formatUsd(p.costUsd));
    ui.tokens.textContent = parts.join(" · ");
    ui.tokens.title = gettext(
      "In %(in)s (cache read %(read)s, write %(write)s), out %(out)s",
      {
        in: formatNumber(p.tokensIn),
        read: formatNumber(p.cacheReadTokens),
        write: formatNumber(p.cacheWriteTokens),
        out: formatNumber(p.tokensOut),
      },
    );
  }

  function renderStatusLine(s) {
    const p = s && s.payload;
    const live = isLive(p) && !s.stopping;
    let label = "";
    // While the approval card shows, the card says what waits: the line stays quiet.
    const carded = live && p.status === "awaiting_human" && !!p.pendingTool;
    if (live && waitsForWorker(app, s)) label = gettext("Waiting for a worker…");
    else if (carded) label = "";
    else if (live) label = (p.progress && p.progress.label) || statusLabel(p.status);
    else if (s && s.stopping) label = gettext("Stopping…");
    if (changed(ui.progress, (s ? s.id : "") + "|" + label)) {
      if (s) s.progressExpanded.value = false;
      fill(
        ui.progress,
        label
          ? shortened(label, STATUS_LINE_LIMIT, { expanded: s ? s.progressExpanded : undefined })
          : null,
      );
    }
    show(ui.watching, live && !app.runner.isMine(s.id));
    show(ui.stop, live && !app.isReadOnly(s));
  }

  return { renderSession, renderStatusLine, setError, clearError };
}
