/*
 * The panel's layout: folded behind the launcher or open, docked beside the page or floating
 * over it, the debugger toggle's state, and Escape (the innermost open thing first: the artifact
 * preview, History, a panel of the More menu; then the sidebar).
 * In the Django admin, admin_room.js places the panel clear of the admin's header and filters.
 */
import { placeInAdmin, watchAdmin } from "./admin_room.js";
import { closeArtifact } from "./cards.js";
import { show } from "./dom.js";
import { gettext } from "./i18n.js";
import { renderTabs } from "./tabs.js";

/** Uses app.saveUi, app.renderSession, app.activeSession. */
export function createLayout(app) {
  const { config, root, state, ui } = app;

  function setCollapsed(collapsed) {
    state.collapsed = collapsed;
    app.saveUi();
    renderAll();
  }

  function renderLayout() {
    show(ui.panel, !state.collapsed);
    ui.launcher.setAttribute("aria-expanded", String(!state.collapsed));
    show(ui.launcher, state.collapsed);
    // Docked: the page gives the panel its width (html.ahentic-docked in sidebar.css). In the
    // admin only where the admin's content keeps its room; otherwise it floats meanwhile.
    const wanted = state.docked && !state.collapsed;
    const docked = config.inAdmin ? placeInAdmin(root, wanted) : wanted;
    if (!config.inAdmin) document.documentElement.classList.toggle("ahentic-docked", docked);
    ui.dock.setAttribute("aria-pressed", String(state.docked));
    ui.dock.setAttribute(
      "aria-label",
      state.docked
        ? gettext("Float the panel over the page")
        : gettext("Dock the panel beside the page"),
    );
    ui.dock.title =
      wanted && !docked
        ? gettext("Too narrow to dock beside this page: the panel floats until the window is wider")
        : state.docked
          ? gettext("Float over the page")
          : gettext("Dock beside the page");
    ui.debugToggle.setAttribute("aria-pressed", String(state.debugOpen));
    ui.debugToggle.setAttribute(
      "aria-label",
      state.debugOpen ? gettext("Hide the debugger") : gettext("Show the debugger"),
    );
  }

  function renderAll() {
    renderLayout();
    renderTabs(app);
    app.renderSession();
  }

  function wire() {
    ui.launcher.addEventListener("click", () => {
      setCollapsed(false);
      ui.input.focus();
    });
    ui.collapse.addEventListener("click", () => {
      setCollapsed(true);
      ui.launcher.focus();
    });
    ui.panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
      event.preventDefault();
      // Escape in the message box leaves the box (its text stays) and never closes the panel:
      // focus goes to the conversation, from where the next Escape does.
      if (event.target === ui.input) {
        ui.transcript.focus();
        return;
      }
      // Escape closes the innermost thing first: an open artifact preview, History, a panel
      // opened from the More menu (focus goes back to its button, or More), then the panel.
      if (closeArtifact(app, app.activeSession())) return;
      if (app.historyPanel.isOpen()) {
        app.historyPanel.close();
        return;
      }
      if (app.closeOpenPanel()) return;
      setCollapsed(true);
      ui.launcher.focus();
    });
    ui.dock.addEventListener("click", () => {
      state.docked = !state.docked;
      app.saveUi();
      renderLayout();
    });
    if (config.inAdmin) watchAdmin(renderLayout);
  }

  return { setCollapsed, renderAll, wire };
}
