// Keyboard shortcuts (templates/base.html): "/" focuses the header's key search, "?" shows their help.
// Neither fires while typing in a field, with a modifier held, or while a dialog is open.
(function () {
  "use strict";
  const typing = (element) => element && (element.isContentEditable || element.closest("input, textarea, select"));

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (typing(event.target) || document.querySelector("dialog[open]")) return;
    if (event.key === "/") {
      const search = document.getElementById("quick-search");
      if (!search) return;
      event.preventDefault(); // not typed into the field it focuses
      search.focus();
      search.select();
    } else if (event.key === "?") {
      document.getElementById("shortcuts")?.showModal();
    }
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-close-shortcuts]")) document.getElementById("shortcuts").close();
  });
})();
