// statestore-admin: the expiry picker of the expiry and add-key dialogs (templates/actions/_form_fields.html).
// The quick choices ("in 1 day", "in 7 days"; "Never" is one of the options) fill the date-time picker, in the time zone the form was shown in (its "tz" field);
// picking a date chooses "At a date and time"; a time that has passed shows the warning and the box that
// confirms it. The server checks all of it again. Loaded once by every page (base.html), deferred: the listeners
// are delegated to the document, and a dialog htmx swaps in is set up after the swap.
(function () {
  "use strict";
  const DAY = 24 * 60 * 60 * 1000;

  // What <input type="datetime-local"> holds for `date` in `zone`: "2026-12-30T17:43".
  function wallTime(date, zone) {
    let format;
    try {
      format = new Intl.DateTimeFormat("en-GB", {
        timeZone: zone || undefined, hourCycle: "h23",
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
      });
    } catch (error) { // a zone this browser does not know: its own
      return wallTime(date, "");
    }
    const part = {};
    format.formatToParts(date).forEach((p) => { part[p.type] = p.value; });
    return part.year + "-" + part.month + "-" + part.day + "T" + part.hour + ":" + part.minute;
  }

  const field = (form, name) => form.querySelector("[name=" + name + "]");
  const choice = (form, value) => form.querySelector("input[name=expiry][value=" + value + "]");

  function update(form) {
    const picker = field(form, "expires_at");
    const warning = form.querySelector("[data-past-warning]");
    if (!picker || !warning) return;
    const chosen = choice(form, "at");
    const zone = field(form, "tz") ? field(form, "tz").value : "";
    const past = chosen.checked && picker.value !== "" && picker.value <= wallTime(new Date(), zone);
    warning.hidden = !past;
    if (!past) field(form, "confirm_past").checked = false;
  }

  function setUp() {
    document.querySelectorAll("form[data-expiry-form]").forEach((form) => {
      form.querySelectorAll("[data-expiry-quick]").forEach((quick) => { quick.hidden = false; });
      update(form);
    });
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("form[data-expiry-form] [data-add-days]");
    if (!button) return;
    const form = button.closest("form");
    const zone = field(form, "tz") ? field(form, "tz").value : "";
    const picker = field(form, "expires_at");
    picker.value = wallTime(new Date(Date.now() + Number(button.dataset.addDays) * DAY), zone);
    picker.dispatchEvent(new Event("change", { bubbles: true })); // datetime.js writes it the app's way
    choice(form, "at").checked = true;
    update(form);
  });
  ["input", "change"].forEach((type) => document.addEventListener(type, (event) => {
    const form = event.target.closest("form[data-expiry-form]");
    if (!form) return;
    if (event.target.name === "expires_at") choice(form, "at").checked = true;
    if (event.target.name === "expires_at" || event.target.name === "expiry") update(form);
  }));

  document.addEventListener("htmx:afterSwap", setUp);
  setUp();
})();
