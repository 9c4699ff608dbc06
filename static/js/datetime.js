// statestore-admin: the one date-time input of the pages (the expiry dialogs, the GC page's "Before", the Audit
// page's "Since" and "Until"): the browser's <input type="datetime-local">, in the reader's time zone (named
// beside it, sent with the form as "tz"), and under it the time picked written as the app writes times,
// "31 Dec 2026, 22:00", whatever format the browser's own picker uses. Loaded once by every page (base.html),
// deferred: the listeners are delegated to the document, and what htmx swaps in is set up after the swap.
(function () {
  "use strict";
  // As the server writes them (dashboard/templatetags/display.py's absolute), in the page's language.
  const MONTHS = [
    pgettext("abbrev. month", "Jan"), pgettext("abbrev. month", "Feb"), pgettext("abbrev. month", "Mar"),
    pgettext("abbrev. month", "Apr"), pgettext("abbrev. month", "May"), pgettext("abbrev. month", "Jun"),
    pgettext("abbrev. month", "Jul"), pgettext("abbrev. month", "Aug"), pgettext("abbrev. month", "Sep"),
    pgettext("abbrev. month", "Oct"), pgettext("abbrev. month", "Nov"), pgettext("abbrev. month", "Dec"),
  ];
  const SELECTOR = "input[type=datetime-local]";

  // "2026-12-31T22:00" (what the input holds: a wall time, no zone) as "31 Dec 2026, 22:00".
  function appFormat(value) {
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})/.exec(value || "");
    if (!m) return "";
    return interpolate(gettext("%(day)s %(month)s %(year)s, %(time)s"),
      { day: Number(m[3]), month: MONTHS[Number(m[2]) - 1], year: m[1], time: m[4] + ":" + m[5] }, true);
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
