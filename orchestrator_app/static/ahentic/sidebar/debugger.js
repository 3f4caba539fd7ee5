/*
 * The debugger: the last trace events of the shown chat and its diagnostics (refreshed while a
 * run is live, downloadable as JSON). The trace reads in the order things happened: the
 * payload's window is the newest rows, oldest first, and the list keeps that order (the newest
 * at the bottom), each row with its time; a caption says how many of the chat's rows it shows.
 */
import { isLive, sessionPath } from "./api.js";
import { changed, el, fill, previewJson, show } from "./dom.js";
import { gettext, locale, ngettext } from "./i18n.js";

const TRACE_SHOWN = 20;

/** A trace row's time: the local clock time shown, the exact ISO time kept. */
function traceTime(at) {
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return null;
  return el("time", {
    datetime: at,
    title: date.toLocaleString(locale()),
    text: date.toLocaleTimeString(locale()),
  });
}

export function createDebugger(app) {
  const { config, client, state, ui } = app;

  function renderDebugger() {
    show(ui.debugger, state.debugOpen);
    if (!state.debugOpen) return;
    const s = app.activeSession();
    const p = s && s.payload;
    const trace = p ? p.trace.slice(-TRACE_SHOWN) : [];
    if (changed(ui.trace, JSON.stringify([trace.map((t) => t.id), p && p.traceCount]))) {
      fill(
        ui.trace,
        ...trace.map((t) =>
          el(
            "li",
            {},
            traceTime(t.at),
            " ",
            el("code", { text: t.type }),
            " ",
            el("span", { text: (t.step != null ? "#" + t.step + " " : "") + (t.summary || "") }),
          ),
        ),
      );
      ui.traceCaption.textContent = trace.length
        ? ngettext(
            "The newest %(shown)s of %(count)s trace event, oldest first.",
            "The newest %(shown)s of %(count)s trace events, oldest first.",
            p.traceCount,
            { shown: trace.length, count: p.traceCount },
          )
        : "";
    }
    const diagnostics =
      state.diagnostics && p && state.diagnostics.id === p.id ? state.diagnostics : null;
    ui.diagnosticsDownload.disabled = !diagnostics;
    ui.diagnostics.textContent = diagnostics
      ? previewJson(
          {
            session: diagnostics.session,
            state: diagnostics.state,
            environment: diagnostics.environment,
          },
          20000,
        )
      : p
        ? gettext(
            "Session %(id)s · version %(version)s · run %(run)s · step %(step)s · %(count)s trace events",
            {
              id: p.id,
              version: p.version,
              run: p.runSeq,
              step: p.stepCount,
              count: p.traceCount,
            },
          )
        : "";
  }

  async function refreshDiagnostics() {
    const s = app.activeSession();
    if (!s) return;
    const result = await client.api("GET", sessionPath(s.id, "diagnostics"));
    if (!result.ok) {
      app.setError(s, result.data);
      return;
    }
    state.diagnostics = result.data;
    renderDebugger();
  }

  /** The heartbeat's part: an open debugger follows a live run. */
  function refreshDiagnosticsWhileLive(s) {
    if (
      state.debugOpen &&
      s &&
      isLive(s.payload) &&
      Date.now() - state.diagnosticsAt > config.diagnosticsRefreshMs
    ) {
      state.diagnosticsAt = Date.now();
      refreshDiagnostics();
    }
  }

  function downloadDiagnostics() {
    if (!state.diagnostics) return;
    const blob = new Blob([JSON.stringify(state.diagnostics, null, 2)], {
      type: "application/json",
    });
    const url = URL.createObjectURL(blob);
    const link = el("a", {
      href: url,
      download: "ahentic-" + state.diagnostics.id + "-diagnostics.json",
    });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  function wire() {
    ui.debugToggle.addEventListener("click", () => {
      state.debugOpen = !state.debugOpen;
      app.saveUi();
      app.renderAll();
      if (state.debugOpen) refreshDiagnostics();
    });
    ui.diagnosticsRefresh.addEventListener("click", refreshDiagnostics);
    ui.diagnosticsDownload.addEventListener("click", downloadDiagnostics);
  }

  return { renderDebugger, refreshDiagnosticsWhileLive, wire };
}
