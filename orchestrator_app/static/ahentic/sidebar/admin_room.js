// The panel's place in the Django admin: it never covers the admin's user links or a change
// list's filters, and docked it leaves the admin's content at least MIN_CONTENT_PX wide.
//
// Floating, the panel starts below the admin's header (#header, so its user links stay in view
// and clickable; it follows the header as the page scrolls) and, on a change list whose filter
// column (#changelist-filter) stands beside the list, to the left of that column; the launcher
// keeps to the left of it too. Docked, the panel takes MAX_PANEL_PX, less whatever the admin's
// content (#content, padding aside) would lose below MIN_CONTENT_PX (or below its own width,
// when narrower); when that leaves it under MIN_PANEL_PX, it floats instead until the window is
// wide enough for both. The numbers reach
// the stylesheet as custom properties (sidebar.css, the "operators" block).

const MIN_CONTENT_PX = 700;
const MIN_PANEL_PX = 320;
const MAX_PANEL_PX = 400;
const GAP_PX = 8; // between the floating panel and the filter column
// Below this width the admin stacks its filters under the list and the panel covers the page.
const NARROW_PX = 720;

function contentWidth(content) {
  const style = getComputedStyle(content);
  return content.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
}

/**
 * Place the panel of the sidebar `root` in the admin; `wantDocked`: the panel is open and the
 * user chose to dock it. Returns whether it is docked (false when the room is too small).
 * Sets html.ahentic-docked itself, since whether it docks depends on measuring the page docked.
 */
export function placeInAdmin(root, wantDocked) {
  const html = document.documentElement;
  html.classList.add("ahentic-admin");
  let docked = wantDocked && window.innerWidth >= NARROW_PX;
  const content = document.getElementById("content");
  if (docked) {
    // The content may lose to the panel only what it has above MIN_CONTENT_PX (a page whose
    // content is narrower by design, the admin's index, keeps its own width).
    html.classList.remove("ahentic-docked");
    const keep = content ? Math.min(MIN_CONTENT_PX, contentWidth(content)) : 0;
    html.style.setProperty("--ahentic-dock-width", MAX_PANEL_PX + "px");
    html.classList.add("ahentic-docked");
    if (content) {
      const width = MAX_PANEL_PX - Math.max(0, keep - contentWidth(content));
      if (width < MIN_PANEL_PX) docked = false;
      else html.style.setProperty("--ahentic-dock-width", Math.floor(width) + "px");
    }
  }
  if (!docked) {
    html.classList.remove("ahentic-docked");
    html.style.removeProperty("--ahentic-dock-width");
  }
  // Floating: below the header while it is in view, left of a filter column beside the list.
  const header = document.getElementById("header");
  const top = header && !docked ? Math.max(0, header.getBoundingClientRect().bottom) : 0;
  let right = 0;
  const filters = document.getElementById("changelist-filter");
  if (filters && !docked && window.innerWidth >= NARROW_PX) {
    const box = filters.getBoundingClientRect();
    const beside = box.width > 0 && box.left > window.innerWidth / 2;
    const room = box.left - GAP_PX;
    if (beside && room >= MIN_PANEL_PX) right = window.innerWidth - room;
  }
  root.style.setProperty("--ahentic-admin-top", Math.round(top) + "px");
  root.style.setProperty("--ahentic-admin-right", Math.round(right) + "px");
  return docked;
}

/** Call `replace()` again when the admin's layout moves: a resized window, the admin's own
 * navigation folded or opened (#content resizes), the header scrolled out of view. */
export function watchAdmin(replace) {
  let queued = false;
  const soon = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      replace();
    });
  };
  window.addEventListener("resize", soon);
  window.addEventListener("scroll", soon, { passive: true });
  const content = document.getElementById("content");
  if (content && "ResizeObserver" in window) new ResizeObserver(soon).observe(content);
}
