// statestore-admin: the dialog, toasts, "select all" and copy. Everything else is htmx. The words shown come from
// Django's JavaScript catalogue (gettext, interpolate), which base.html loads before this file.
(function () {
  "use strict";
  const modal = () => document.getElementById("modal");
  const toasts = () => document.getElementById("toasts");

  // htmx keeps no snapshots of pages: Back or Forward to a URL htmx pushed reloads the whole, current page from
  // the server (and dashboard/caching.py keeps htmx's partials out of the browser's cache).
  htmx.config.historyCacheSize = 0;
  htmx.config.refreshOnHistoryMiss = true;

  // Toasts (#toasts in base.html, css/toasts.css): stacked in a corner, newest last, at most MAX_TOASTS; a long
  // message is clipped to a few lines (all of it in the tooltip and for screen readers). Success and info go
  // after TOAST_MS, not while hovered or focused; errors and warnings stay until closed.
  const MAX_TOASTS = 4;
  const TOAST_MS = 6000;
  const UNDO_MS = 15000; // a toast with Undo stays longer: time to read it and change one's mind
  const lasting = (box) => box.classList.contains("toast-error") || box.classList.contains("toast-warning");

  function dismissLater(box) {
    if (lasting(box)) return;
    let timer = null;
    const start = () => {
      clearTimeout(timer);
      const ms = box.querySelector(".toast-undo") ? UNDO_MS : TOAST_MS;
      if (!box.matches(":hover, :focus-within")) timer = setTimeout(() => box.remove(), ms);
    };
    box.addEventListener("mouseenter", () => clearTimeout(timer));
    box.addEventListener("focusin", () => clearTimeout(timer));
    box.addEventListener("mouseleave", start);
    box.addEventListener("focusout", () => setTimeout(start)); // once focus has moved
    start();
  }

  // A toast's Undo (templates/includes/_toast_undo.html): a POST of the action's restore, CSRF token in the
  // form and in hx-headers; its answer opens in the dialog.
  function undoForm(url) {
    const form = document.createElement("form");
    form.method = "post";
    form.action = url;
    form.className = "toast-undo";
    form.setAttribute("hx-post", url);
    form.setAttribute("hx-target", "#modal-body");
    const token = document.createElement("input");
    token.type = "hidden";
    token.name = "csrfmiddlewaretoken";
    token.value = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
    const button = document.createElement("button");
    button.type = "submit";
    button.className = "link";
    button.dataset.testid = "toast-undo";
    button.textContent = gettext("Undo");
    form.append(token, button);
    return form;
  }

  function toast(message, level, undo) {
    level = level || "info";
    const box = document.createElement("div");
    box.className = "toast toast-" + level;
    if (lasting(box)) box.setAttribute("role", "alert");
    const text = document.createElement("p");
    text.className = "toast-text";
    text.textContent = message; // user data: never HTML
    text.title = message;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.dataset.toastClose = "";
    close.setAttribute("aria-label", gettext("Dismiss notification")); // its × is drawn by toasts.css
    box.append(text, close);
    if (undo) box.insertBefore(undoForm(undo), close);
    toasts().append(box);
    if (undo) htmx.process(box);
    const boxes = toasts().querySelectorAll(".toast");
    if (boxes.length > MAX_TOASTS) ([...boxes].find((b) => !lasting(b)) || boxes[0]).remove();
    dismissLater(box);
  }

  // A dialog: focus goes to the first field with an error, else the element marked autofocus, else the first
  // field; a confirmation (no field) focuses Cancel, so Enter never confirms a destructive action by itself.
  function focusInDialog() {
    const dialog = modal();
    const target = dialog.querySelector("[aria-invalid=true]") || dialog.querySelector("[autofocus]")
      || dialog.querySelector("textarea, select, input:not([type=hidden])") || dialog.querySelector("[data-close]");
    target?.focus();
  }

  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id !== "modal-body") return;
    const opening = !modal().open;
    if (opening) {
      modal().setAttribute("aria-labelledby", "modal-title"); // every dialog's heading (templates/actions/...)
      modal().showModal();
      // A modal dialog makes the rest of the page inert: toasts move into it while it is open, so that one
      // about the dialog's own request can be read and closed.
      modal().append(toasts());
    }
    if (opening || !modal().contains(document.activeElement)) focusInDialog(); // new, or its form replaced
  });
  document.body.addEventListener("toast", (event) => toast(event.detail.message, event.detail.level, event.detail.undo));
  document.body.addEventListener("closeModal", () => { if (modal().open) modal().close(); });
  // A refusal (4xx but 422, a form re-shown: base.html's htmx-config) or a server error (5xx): a toast saying why.
  const failed = (xhr) => {
    const text = xhr.getResponseHeader("Content-Type")?.startsWith("text/plain") ? xhr.responseText : "";
    toast(text || interpolate(gettext("The request failed (%(status)s)."), { status: xhr.status }, true), "error");
  };
  document.addEventListener("htmx:afterRequest", (event) => {
    const status = event.detail.xhr?.status;
    if (status >= 400 && status < 500 && status !== 422) failed(event.detail.xhr);
  });
  document.addEventListener("htmx:afterRequest", (event) => { // an Undo done is gone from its toast
    if (event.detail.successful && event.detail.elt.matches?.(".toast-undo")) event.detail.elt.closest(".toast")?.remove();
  });
  document.addEventListener("htmx:responseError", (event) => failed(event.detail.xhr));
  document.addEventListener("htmx:sendError", () => toast(gettext("The server cannot be reached."), "error"));

  document.addEventListener("click", (event) => {
    const closeToast = event.target.closest("[data-toast-close]");
    if (closeToast) {
      const box = closeToast.closest(".toast");
      const neighbour = box.nextElementSibling || box.previousElementSibling;
      const keyboard = closeToast.matches(":focus-visible");
      box.remove();
      if (keyboard) neighbour?.querySelector("[data-toast-close]")?.focus(); // not lost to the page's top
      return;
    }
    const close = event.target.closest("[data-close]");
    if (close && modal().open) { modal().close(); return; }
    const copy = event.target.closest("[data-copy-from]");
    if (copy) {
      const source = document.getElementById(copy.dataset.copyFrom);
      // a large value's text is not in its page (templates/keys/_value.html): loaded first, from data-src
      const text = source.value || !source.dataset.src ? Promise.resolve(source.value)
        : fetch(source.dataset.src, { headers: { "HX-Request": "true" } })
          .then((response) => (response.ok ? response.text() : Promise.reject(response.status)));
      text.then((value) => navigator.clipboard.writeText(value)).then(
        () => toast(gettext("Value copied to the clipboard."), "success"),
        () => toast(gettext("The browser refused to copy."), "error"));
    }
  });
  // Buttons acting on selected keys (data-needs-selection) are enabled only while a key is selected.
  const selected = () => document.querySelector("#keys-panel tbody input[type=checkbox]:checked");
  const syncSelection = () => document.querySelectorAll("[data-needs-selection]").forEach((button) => {
    button.disabled = !selected();
  });
  document.addEventListener("change", (event) => {
    if (event.target.classList.contains("select-all")) {
      const table = event.target.closest("table");
      table.querySelectorAll("tbody input[type=checkbox]").forEach((box) => { box.checked = event.target.checked; });
    }
    if (event.target.type === "checkbox") syncSelection();
    // The language menu (includes/_language_menu.html) applies a choice at once; its button is for no script.
    if (event.target.matches("[data-autosubmit]")) event.target.form.requestSubmit();
  });
  document.querySelectorAll("[data-autosubmit-button]").forEach((button) => { button.hidden = true; });
  // The header's menu on a phone (base.html, app.css .topbar-menu): folded behind a disclosure button, the search
  // left in the header (folded by app.css from the first paint); Escape closes it, the focus back on the button.
  const menuButton = document.querySelector("[data-menu-toggle]");
  if (menuButton) {
    const header = menuButton.closest(".topbar");
    const openMenu = (open) => {
      menuButton.setAttribute("aria-expanded", String(open));
      header.classList.toggle("menu-open", open);
    };
    menuButton.addEventListener("click", () => openMenu(menuButton.getAttribute("aria-expanded") !== "true"));
    header.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || menuButton.getAttribute("aria-expanded") !== "true") return;
      openMenu(false);
      menuButton.focus();
    });
  }
  document.addEventListener("htmx:afterSettle", syncSelection);
  // Auto-refresh (includes/_refresh.html): a poll is skipped while the tab is hidden, a dialog is open or
  // keys are selected (a refresh would drop the selection); the panel refreshes when the tab is shown again.
  document.addEventListener("htmx:confirm", (event) => {
    if (!event.detail.elt.hasAttribute("data-auto-refresh")) return;
    if (event.detail.triggeringEvent?.type === "stateChanged") return; // after an action: always
    if (document.visibilityState !== "visible" || modal().open || selected()) event.preventDefault();
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") return;
    document.querySelectorAll("[data-auto-refresh]").forEach((element) => htmx.trigger(element, "autoRefresh"));
  });
  document.addEventListener("DOMContentLoaded", () => {
    syncSelection(); // a browser may restore checked boxes on reload
    document.querySelectorAll("#toasts .toast").forEach(dismissLater); // the server's messages
    // Dialog closed with Escape or Cancel: clear it so a stale form is never resubmitted; toasts go back.
    modal()?.addEventListener("close", () => {
      document.getElementById("modal-body").innerHTML = "";
      modal().removeAttribute("aria-labelledby");
      document.body.append(toasts());
    });
  });
})();
