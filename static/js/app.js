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
  document.addEventListener("change", (event) => {
    if (event.target.classList.contains("select-all")) {
      const table = event.target.closest("table");
      table.querySelectorAll("tbody input[type=checkbox]").forEach((box) => { box.checked = event.target.checked; });
    }
  });
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("#toasts .toast").forEach((box) => setTimeout(() => box.remove(), 6000));
    // Dialog closed with Escape or Cancel: clear it so a stale form is never resubmitted.
    modal()?.addEventListener("close", () => { document.getElementById("modal-body").innerHTML = ""; });
  });
})();
