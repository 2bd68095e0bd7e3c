// Candidate review: source/diff tabs, line comments, and keyboard shortcuts with a help overlay.
(function () {
  var tabs = Array.prototype.slice.call(document.querySelectorAll("#code-tabs [data-view]"));
  function show(view) {
    tabs.forEach(function (tab) {
      var on = tab.dataset.view === view;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      var panel = document.getElementById("view-" + tab.dataset.view);
      if (panel) panel.hidden = !on;
    });
    document.body.dataset.codeView = view;
  }
  tabs.forEach(function (tab) { tab.addEventListener("click", function () { show(tab.dataset.view); }); });

  function cycleDiff() {
    if (!tabs.length) return;
    var current = tabs.findIndex(function (t) { return t.getAttribute("aria-selected") === "true"; });
    show(tabs[(current + 1) % tabs.length].dataset.view);
  }

  var help = document.getElementById("shortcuts-help");
  function toggleHelp(force) {
    if (!help) return;
    help.hidden = force === undefined ? !help.hidden : !force;
  }
  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-shortcuts-help]")) toggleHelp();
    var line = event.target.closest("[data-comment-line]");
    if (line) {
      var field = document.getElementById("id_line");
      if (field) { field.value = line.dataset.commentLine; document.getElementById("id_body").focus(); }
    }
  });

  // Line comments: the comment section carries the rows that belong under commented lines
  // (a <template>); whenever the section is swapped in (a comment posted, edited, resolved or
  // deleted here, or a live refresh), the source table's rows are made to match it, so a new
  // line comment shows under its line at once.
  var synced = document.getElementById("line-comments-data"); // the page came with its rows
  function syncLineComments() {
    var data = document.getElementById("line-comments-data");
    var table = document.getElementById("node-source");
    if (!data || !table || data === synced) return;
    synced = data;
    table.querySelectorAll("tr.line-comments").forEach(function (row) { row.remove(); });
    Array.prototype.forEach.call(data.content.querySelectorAll("tr.line-comments"), function (row) {
      var line = document.getElementById("L" + row.id.replace("line-comments-", ""));
      if (line) line.after(document.importNode(row, true));
    });
  }
  document.body.addEventListener("htmx:afterSettle", syncLineComments);

  function go(id) {
    var link = document.getElementById(id);
    if (link) window.location.href = link.href;
  }
  function jump(id) {
    var target = document.getElementById(id);
    if (!target) return;
    target.scrollIntoView({ block: "start" });
    var first = target.querySelector("details");
    if (first) first.open = true;
  }
  document.addEventListener("keydown", function (event) {
    var t = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (t.closest && t.closest("input, textarea, select, [contenteditable]")) {
      if (event.key === "Escape") t.blur();
      return;
    }
    var actions = {
      "j": function () { go("next-candidate"); },
      "k": function () { go("prev-candidate"); },
      "d": cycleDiff,
      "e": function () { jump("evidence"); },
      "l": function () { jump("latency"); },
      "c": function () { var b = document.getElementById("id_body"); if (b) b.focus(); },
      "?": function () { toggleHelp(); },
      "Escape": function () { toggleHelp(false); },
    };
    if (actions[event.key]) { event.preventDefault(); actions[event.key](); }
  });
})();
