// The preview of a restore from a file (templates/audit/_upload_preview.html): its "Restore" sends the same file
// again, so the file chosen on the Audit page is put into the preview's form, and its "The same file again"
// field (what a browser without JavaScript shows) is hidden.
(function () {
  "use strict";
  document.addEventListener("htmx:afterSwap", (event) => {
    const field = event.detail.target.querySelector?.("[data-same-file]");
    const chosen = document.getElementById("restore-file");
    if (!field || !chosen?.files.length) return;
    const files = new DataTransfer();
    files.items.add(chosen.files[0]);
    field.querySelector("input[type=file]").files = files.files;
    field.hidden = true;
  });
})();
