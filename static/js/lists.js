// Lists on a phone. Tables that become cards (table.stack, static/css/app.css): each cell is labelled with its
// column's heading (data-label, shown by the stylesheet), on load and after every htmx swap. Filters that fold
// (details.filters-fold, closed by the server): opened on a wider screen, where they take no screen of their own.
(function () {
  "use strict";
  function label() {
    document.querySelectorAll("table.stack").forEach((table) => {
      const headings = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
      table.querySelectorAll("tbody tr").forEach((row) => {
        [...row.children].forEach((cell, index) => {
          if (!cell.hasAttribute("colspan") && headings[index]) cell.dataset.label = headings[index];
        });
      });
    });
  }
  const WIDE = "(min-width: 701px)"; // app.css's phone layout ends at 700px
  document.addEventListener("DOMContentLoaded", () => {
    label();
    if (window.matchMedia(WIDE).matches) document.querySelectorAll("details.filters-fold").forEach((d) => { d.open = true; });
  });
  document.addEventListener("htmx:afterSettle", label);
})();
