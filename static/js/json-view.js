// The JSON view of a value (templates/keys/_value.html): its tools appear with JavaScript. "Raw" shows the value's
// text instead of the tree; "Expand all" and "Collapse all" open or fold every level; the search highlights each
// match (keys and values, case-insensitive) and unfolds the levels around it. A value that is not a JSON tree
// (plain text, or nested too deep: state_tags.json_tree) keeps only "Copy JSON".
// A large value's page holds only its first entries and levels (templatetags/json_folding.py): "Show N more" and
// opening a folded level load the rest through htmx; "Expand all" and the search first load the whole tree
// (the value's parts URL, data-src, with all=1), and "Raw" loads the raw text when the page does not hold it.
(function () {
  "use strict";
  const SEARCH_DELAY_MS = 150;

  const part = (src, query) => `${src}${src.includes("?") ? "&" : "?"}${query}`;
  async function load(url) { // a part of the value: the server answers parts to htmx only
    const response = await fetch(url, { headers: { "HX-Request": "true" } });
    if (!response.ok) throw new Error(`${response.status} ${url}`);
    return response.text();
  }

  function unmark(tree) {
    tree.querySelectorAll("mark.j-match").forEach((mark) => mark.replaceWith(...mark.childNodes));
    tree.normalize();
  }

  function highlight(tree, needle) {
    const found = [];
    const walker = document.createTreeWalker(tree, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => node.parentElement.closest(".j-key, .j-str, .j-num, .j-bool")
        ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT,
    });
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (let node of nodes) {
      let at = node.data.toLowerCase().indexOf(needle);
      while (at >= 0) {
        const match = node.splitText(at);
        node = match.splitText(needle.length);
        const mark = document.createElement("mark");
        mark.className = "j-match";
        match.replaceWith(mark);
        mark.append(match);
        found.push(mark);
        at = node.data.toLowerCase().indexOf(needle);
      }
    }
    found.forEach((mark) => {
      for (let fold = mark.closest("details"); fold; fold = fold.parentElement.closest("details")) fold.open = true;
    });
    return found;
  }

  function setUp(view) {
    const tree = view.querySelector(".json-tree");
    const tools = view.querySelector("[data-json-tools]");
    tools.hidden = false;
    if (!tree) {
      tools.querySelectorAll("button:not(.copy), input, [data-json-matches]").forEach((tool) => { tool.hidden = true; });
      return;
    }
    const raw = view.querySelector("[data-json-raw-view]");
    const rawButton = tools.querySelector("[data-json-raw]");
    const search = tools.querySelector("[data-json-search]");
    const matches = tools.querySelector("[data-json-matches]");
    const showRaw = (on) => {
      raw.hidden = !on;
      tree.hidden = on;
      rawButton.setAttribute("aria-pressed", String(on));
      tools.querySelectorAll("[data-json-expand], [data-json-collapse]").forEach((b) => { b.disabled = on; });
    };
    let whole = null; // the whole tree, once loaded
    const failed = () => { matches.textContent = gettext("The rest of the value could not be loaded."); };
    const loadWhole = () => { // true once the tree holds the whole value
      if (!tree.querySelector("[data-json-later], .j-more")) return Promise.resolve(true);
      if (!whole) matches.textContent = gettext("Loading the whole value…");
      whole ??= load(part(tree.dataset.src, "path=%5B%5D&all=1")).then((html) => {
        tree.querySelector(":scope > details > ul").innerHTML = html; // escaped by the server
        matches.textContent = "";
        return true;
      }, () => {
        whole = null;
        failed();
        return false;
      });
      return whole;
    };
    rawButton.addEventListener("click", async () => {
      if (raw.hidden && raw.dataset.src && !raw.dataset.loaded) {
        try {
          raw.textContent = await load(raw.dataset.src);
          raw.dataset.loaded = "";
        } catch { failed(); return; }
      }
      showRaw(raw.hidden);
    });
    tools.querySelector("[data-json-expand]").addEventListener("click", async () => {
      if (!(await loadWhole())) return;
      tree.querySelectorAll("details").forEach((fold) => { fold.open = true; });
    });
    tools.querySelector("[data-json-collapse]").addEventListener("click", () => {
      tree.querySelectorAll("details").forEach((fold, index) => { fold.open = index === 0; }); // the top stays open
    });
    let timer = null;
    let found = [];
    let current = -1;
    let runs = 0;
    const run = async () => {
      const needle = search.value.trim().toLowerCase();
      const thisRun = ++runs;
      if (needle && !(await loadWhole())) return;
      if (thisRun !== runs) return; // typed on while the value loaded
      unmark(tree);
      found = needle ? highlight(tree, needle) : [];
      current = -1;
      matches.textContent = needle
        ? interpolate(ngettext("%(count)s match", "%(count)s matches", found.length), { count: found.length }, true)
        : "";
      if (found.length) showRaw(false);
      if (found.length) next();
    };
    const next = () => { // Enter: the next match, in view
      if (!found.length) return;
      found[current]?.classList.remove("j-current");
      current = (current + 1) % found.length;
      found[current].classList.add("j-current");
      found[current].scrollIntoView({ block: "nearest" });
    };
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, SEARCH_DELAY_MS); });
    search.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      clearTimeout(timer);
      if (found.length && search.value.trim()) next(); else run();
    });
  }

  const setUpAll = (root) => root.querySelectorAll("[data-json-view]:not([data-ready])").forEach((view) => {
    view.dataset.ready = "";
    setUp(view);
  });
  document.addEventListener("DOMContentLoaded", () => setUpAll(document));
  document.addEventListener("htmx:afterSettle", (event) => setUpAll(event.detail.elt)); // a refreshed panel
})();
