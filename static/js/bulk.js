// The selection bar of the run and task pages (includes/_bulk_bar.html) and their rows' action menus
// (includes/_task_keys_table.html, each fetching its buttons when first opened). app.js enables the bar's buttons
// while a key is ticked; this file says how many are, and offers "Select all N matching" once every key of the page
// is ticked and more match than the page shows: the bar's buttons then send the run and its filter (the hidden
// inputs of [data-matching]) and the confirmation lists every matching key. Unticking a key goes back to the ticked
// keys.
(function () {
  "use strict";
  // A count as the pages write it: thousands grouped by three with the language's separator (statestore_admin/formats).
  const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, get_format("THOUSAND_SEPARATOR"));
  const boxes = (panel) => [...panel.querySelectorAll("tbody input[name=ids]")];

  function setMatching(bar, on) {
    const matching = bar.querySelector("[data-matching]");
    if (!matching) return;
    matching.querySelectorAll("input").forEach((input) => { input.disabled = !on; });
    matching.dataset.on = on ? "1" : "";
  }

  function sync() {
    const panel = document.getElementById("keys-panel");
    const bar = panel?.querySelector("[data-bulk-bar]");
    if (!bar) return;
    const all = boxes(panel);
    const ticked = all.filter((box) => box.checked).length;
    const matching = bar.querySelector("[data-matching]");
    if (matching && ticked < all.length) setMatching(bar, false);
    const on = Boolean(matching?.dataset.on);
    const count = bar.querySelector("[data-selected-count]");
    count.textContent = on
      ? interpolate(ngettext("All %(count)s matching keys selected", "All %(count)s matching keys selected",
        Number(matching.dataset.matchingCount)), { count: matching.dataset.matchingLabel }, true)
      : interpolate(ngettext("%(count)s selected", "%(count)s selected", ticked),
        { count: grouped(ticked) }, true);
    bar.classList.toggle("has-selection", ticked > 0);
    if (matching) {
      // Offered once the whole page is ticked, when more keys match than the page shows.
      const more = Number(matching.dataset.matchingCount) > all.length || matching.querySelector("[data-too-many]");
      matching.hidden = !(all.length && ticked === all.length && more);
      matching.querySelector("[data-select-matching]")?.toggleAttribute("hidden", on);
      matching.querySelector("[data-clear-selection]").hidden = !on;
    }
  }

  document.addEventListener("click", (event) => {
    const bar = event.target.closest("[data-bulk-bar]");
    if (bar && event.target.closest("[data-select-matching]")) {
      setMatching(bar, true);
      sync();
      bar.querySelector("[data-clear-selection]")?.focus();
    } else if (bar && event.target.closest("[data-clear-selection]")) {
      setMatching(bar, false);
      const all = [...document.querySelectorAll("#keys-panel input[type=checkbox]")];
      all.forEach((box) => { box.checked = false; });
      all[0]?.dispatchEvent(new Event("change", { bubbles: true })); // app.js disables the buttons again
    }
    // A row's menu: opening one closes the others; a click elsewhere closes them all.
    const menu = event.target.closest("details.row-menu");
    document.querySelectorAll("details.row-menu[open]").forEach((open) => { if (open !== menu) open.open = false; });
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const menu = event.target.closest?.("details.row-menu[open]");
    if (menu && !document.getElementById("modal")?.open) {
      menu.open = false;
      menu.querySelector("summary").focus();
    }
  });
  // After a row's action opens its dialog, the menu closes (the dialog's Cancel returns to the page); the menu's own
  // request, which fetches its buttons when it first opens (keys/_row_menu.html), leaves it open.
  document.addEventListener("htmx:beforeRequest", (event) => {
    event.detail.elt.closest?.(".row-menu-items")?.closest("details.row-menu")?.removeAttribute("open");
  });
  document.addEventListener("change", (event) => { if (event.target.type === "checkbox") sync(); });
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("DOMContentLoaded", sync);
})();
