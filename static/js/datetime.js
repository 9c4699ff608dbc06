// statestore-admin: the one date-time input of the pages (the expiry dialogs, the GC page's "Before", the Audit
// page's "Since" and "Until"): the browser's <input type="datetime-local">, in the reader's time zone (named
// beside it, sent with the form as "tz"), and under it the time picked written as the app writes times,
// "31 Dec 2026, 22:00", whatever format the browser's own picker uses. Loaded once by every page (base.html),
// deferred: the listeners are delegated to the document, and what htmx swaps in is set up after the swap.
(function () {
  "use strict";
  // The page's language writes a time with Django's date format letters (DATETIME_FORMAT, in the JavaScript
  // catalogue) and its month abbreviations (on <html>, from the server): as display.py's absolute() does.
  const MONTHS = (document.documentElement.dataset.months || "jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec")
    .split(",");
  const SELECTOR = "input[type=datetime-local]";

  // "2026-12-31T22:00" (what the input holds: a wall time, no zone) as "31 Dec 2026, 22:00".
  function appFormat(value) {
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})/.exec(value || "");
    if (!m) return "";
    const month = MONTHS[Number(m[2]) - 1];
    const letters = {
      j: String(Number(m[3])), d: m[3], n: String(Number(m[2])), m: m[2], Y: m[1], H: m[4], i: m[5],
      b: month, M: month.charAt(0).toUpperCase() + month.slice(1),
    };
    const pattern = get_format("DATETIME_FORMAT");
    let text = "";
    for (let k = 0; k < pattern.length; k++) {
      const letter = pattern[k];
      if (letter === "\\") text += pattern[++k] || "";
      else text += Object.prototype.hasOwnProperty.call(letters, letter) ? letters[letter] : letter;
    }
    return text;
  }

  function shownAs(input) {
    let shown = input.parentElement.querySelector("[data-shown-as='" + input.id + "']");
    if (!shown) {
      shown = document.createElement("span");
      shown.className = "muted small shown-as";
      shown.dataset.shownAs = input.id;
      shown.setAttribute("aria-hidden", "true"); // the input itself is what assistive technology reads
      const after = input.parentElement.querySelector("#" + CSS.escape(input.id) + "-zone") || input;
      after.insertAdjacentElement("afterend", shown);
    }
    return shown;
  }

  function show(input) {
    if (!input.id) return;
    const text = appFormat(input.value);
    const shown = shownAs(input);
    shown.textContent = text;
    shown.hidden = !text;
  }

  function setUp() {
    document.querySelectorAll(SELECTOR).forEach(show);
  }

  ["input", "change"].forEach((type) => document.addEventListener(type, (event) => {
    if (event.target.matches(SELECTOR)) show(event.target);
  }));
  document.addEventListener("htmx:afterSwap", setUp);

  setUp();
})();
