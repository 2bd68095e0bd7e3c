// @-autocomplete in comment and review boxes: typing @ and a few letters in a textarea inside an
// element with data-mentions-url lists matching usernames; arrows move, Enter or Tab picks,
// Escape closes, a click picks. What was typed after the @ is replaced by the full name.
(function () {
  var list = document.createElement("ul");
  list.id = "mention-suggestions";
  list.className = "mention-list";
  list.setAttribute("role", "listbox");
  list.hidden = true;
  document.body.appendChild(list);
  var field = null, start = -1, active = 0, asked = 0;

  function close() { list.hidden = true; list.innerHTML = ""; field = null; }

  function query(textarea) {
    var before = textarea.value.slice(0, textarea.selectionStart);
    var match = /(^|[^\w@])@([\w.+-]*)$/.exec(before);
    return match ? { text: match[2], at: before.length - match[2].length - 1 } : null;
  }

  function mark() {
    Array.prototype.forEach.call(list.children, function (li, i) {
      li.setAttribute("aria-selected", i === active ? "true" : "false");
    });
  }

  function pick(username) {
    if (!field) return;
    var end = field.selectionStart, value = field.value;
    field.value = value.slice(0, start) + "@" + username + " " + value.slice(end);
    var caret = start + username.length + 2;
    field.setSelectionRange(caret, caret);
    field.focus();
    close();
  }

  function show(textarea, users) {
    list.innerHTML = "";
    users.forEach(function (u) {
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.dataset.username = u.username;
      li.textContent = "@" + u.username + (u.name ? " · " + u.name : "");
      list.appendChild(li);
    });
    if (!users.length) { close(); return; }
    var box = textarea.getBoundingClientRect();
    list.style.left = window.scrollX + box.left + "px";
    list.style.top = window.scrollY + box.bottom + 2 + "px";
    list.hidden = false;
    active = 0;
    mark();
  }

  document.addEventListener("input", function (event) {
    var textarea = event.target;
    var scope = textarea.tagName === "TEXTAREA" && textarea.closest("[data-mentions-url]");
    if (!scope) return;
    var q = query(textarea);
    if (!q || !q.text) { close(); return; }
    var ticket = ++asked;
    fetch(scope.dataset.mentionsUrl + "?q=" + encodeURIComponent(q.text), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : { users: [] }; })
      .then(function (data) {
        if (ticket !== asked) return; // a later keystroke asked again
        field = textarea;
        start = q.at;
        show(textarea, data.users || []);
      });
  });

  document.addEventListener("keydown", function (event) {
    if (list.hidden || event.target !== field) return;
    var n = list.children.length;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      active = (active + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
      mark();
    } else if (event.key === "Enter" || event.key === "Tab") {
      pick(list.children[active].dataset.username);
    } else if (event.key === "Escape") {
      close();
    } else {
      return;
    }
    event.preventDefault();
  }, true);

  list.addEventListener("mousedown", function (event) {
    var li = event.target.closest("li");
    if (li) { event.preventDefault(); pick(li.dataset.username); }
  });
  document.addEventListener("click", function (event) {
    if (!list.hidden && !list.contains(event.target) && event.target !== field) close();
  });
})();
