// ctxline inspector: small conveniences; every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // live filtering of a table while typing in its search box (the form still searches on Enter)
  for (const input of document.querySelectorAll("input[data-filter]")) {
    const table = document.querySelector(input.dataset.filter);
    if (!table) continue;
    input.addEventListener("input", () => {
      const q = input.value.trim().toLowerCase();
      for (const row of table.tBodies[0].rows) {
        const text = row.dataset.search;
        if (text === undefined) continue;
        row.hidden = q !== "" && !text.includes(q);
      }
    });
  }
  // [ and ] walk to the previous / next step on a request page
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement || event.ctrlKey || event.metaKey || event.altKey) return;
    const id = event.key === "[" ? "prev-step" : event.key === "]" ? "next-step" : null;
    const link = id && document.getElementById(id);
    if (link) link.click();
  });
});
