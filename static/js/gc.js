// statestore-admin: the GC page's cutoff (templates/gc/index.html). Typing an age or a date chooses its
// option, so that the preview counts for the cutoff typed; on submit the fields of the other options are left
// out, so that a value typed before switching back to "Now" is not sent (the server refuses such a mismatch
// rather than count for one cutoff while another is filled in).
(function () {
  "use strict";
  const FORM = "form[data-gc-cutoff-form]";

  function choose(field) {
    const form = field.closest(FORM);
    const radio = form && form.querySelector("input[name=cutoff][value=" + field.dataset.cutoffKind + "]");
    if (radio) radio.checked = true;
  }

  ["input", "change"].forEach((type) => document.addEventListener(type, (event) => {
    if (event.target.matches(FORM + " [data-cutoff-kind]")) choose(event.target);
  }));

  document.addEventListener("submit", (event) => {
    const form = event.target.closest(FORM);
    if (!form) return;
    const chosen = form.querySelector("input[name=cutoff]:checked");
    form.querySelectorAll("[data-cutoff-kind]").forEach((field) => {
      field.disabled = !chosen || field.dataset.cutoffKind !== chosen.value;
    });
  });

  // Back to the page from the browser's cache: the fields are usable again.
  window.addEventListener("pageshow", () => {
    document.querySelectorAll(FORM + " [data-cutoff-kind]").forEach((field) => { field.disabled = false; });
  });
})();
