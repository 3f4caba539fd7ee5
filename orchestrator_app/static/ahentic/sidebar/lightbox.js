/*
 * Images in the transcript open larger on click: a modal <dialog> with the image at up to the
 * window's size, its name, a Close button and a link to the file in a new tab. Escape, Close or
 * a click beside the image closes it, and focus goes back to the thumbnail. A click with a
 * modifier key (or the middle button) still opens the file in a new tab, as the link says.
 */
import { el } from "./dom.js";
import { gettext } from "./i18n.js";

const THUMBNAIL = ".ahentic-attachment.is-image";

export function createLightbox(app) {
  // The <img> exists only while the dialog is open: the sidebar holds no image of its own.
  const frame = el("div", { className: "ahentic-lightbox-frame" });
  const caption = el("p", { className: "ahentic-lightbox-caption", id: "ahentic-lightbox-caption" });
  const link = el("a", {
    className: "ahentic-lightbox-link",
    target: "_blank",
    rel: "noopener",
    text: gettext("Open in a new tab"),
  });
  const closeButton = el("button", {
    type: "button",
    className: "ahentic-button ahentic-lightbox-close",
    text: gettext("Close"),
  });
  const dialog = el(
    "dialog",
    {
      className: "ahentic-lightbox",
      "data-role": "lightbox",
      "aria-labelledby": "ahentic-lightbox-caption",
    },
    frame,
    el("div", { className: "ahentic-lightbox-bar" }, caption, link, closeButton),
  );
  app.root.append(dialog);
  let opener = null;

  function open(thumbnail) {
    const source = thumbnail.querySelector("img");
    const name = thumbnail.getAttribute("title") || (source && source.alt) || "";
    frame.replaceChildren(
      el("img", {
        className: "ahentic-lightbox-image",
        src: thumbnail.getAttribute("href"),
        alt: name,
      }),
    );
    caption.textContent = name || gettext("Image");
    link.href = thumbnail.getAttribute("href");
    opener = thumbnail;
    dialog.showModal();
    closeButton.focus();
  }

  dialog.addEventListener("close", () => {
    frame.replaceChildren();
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  });
  closeButton.addEventListener("click", () => dialog.close());
  // A click on the backdrop lands on the dialog itself (its content covers the rest).
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close();
  });
  app.root.addEventListener("click", (event) => {
    const thumbnail = event.target.closest && event.target.closest(THUMBNAIL);
    if (!thumbnail || !app.root.contains(thumbnail) || thumbnail.closest(".ahentic-lightbox")) {
      return;
    }
    if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) {
      return; // the link's own behaviour: a new tab or window
    }
    event.preventDefault();
    open(thumbnail);
  });

  return { open, close: () => dialog.open && dialog.close() };
}
