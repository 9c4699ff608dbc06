// statestore-admin: the dialog, toasts, "select all" and copy. Everything else is htmx.
(function () {
  "use strict";
  const modal = () => document.getElementById("modal");

  function toast(message, level) {
    const box = document.createElement("div");
    box.className = "toast toast-" + (level || "info");
    box.textContent = message; // user data: never HTML
    document.getElementById("toasts").appendChild(box);
    setTimeout(() => box.remove(), level === "error" ? 10000 : 5000);
  }

  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id === "modal-body" && !modal().open) {
      modal().showModal();
      const first = modal().querySelector("textarea, input:not([type=hidden]), button[type=submit]");
      if (first) first.focus();
    }
  });
  document.body.addEventListener("toast", (event) => toast(event.detail.message, event.detail.level));
  document.body.addEventListener("closeModal", () => { if (modal().open) modal().close(); });
  document.addEventListener("htmx:responseError", (event) => {
    const xhr = event.detail.xhr;
    const text = xhr.getResponseHeader("Content-Type")?.startsWith("text/plain") ? xhr.responseText : "";
    toast(text || "The request failed (" + xhr.status + ").", "error");
  });
  document.addEventListener("htmx:sendError", () => toast("The server cannot be reached.", "error"));

  document.addEventListener("click", (event) => {
    const close = event.target.closest("[data-close]");
    if (close && modal().open) { modal().close(); return; }
    const copy = event.target.closest("[data-copy-from]");
    if (copy) {
      const source = document.getElementById(copy.dataset.copyFrom);
      navigator.clipboard.writeText(source.value).then(
        () => toast("Value copied to the clipboard.", "success"),
        () => toast("The browser refused to copy.", "error"));
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
  });
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
    document.querySelectorAll("#toasts .toast").forEach((box) => setTimeout(() => box.remove(), 6000));
    // Dialog closed with Escape or Cancel: clear it so a stale form is never resubmitted.
    modal()?.addEventListener("close", () => { document.getElementById("modal-body").innerHTML = ""; });
  });
})();
