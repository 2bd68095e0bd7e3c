// Live sections: an element with data-live-section inside an htmx websocket (ws-connect)
// is re-fetched in place when a message arrives or the socket (re)opens, debounced, from
// data-live-url (default: this page). While the reader is typing in one of its fields, has left
// unsent text in one, or has a reply or edit box open, the refresh waits, so nothing they wrote
// is lost.
(function () {
  var HEADER = "X-KE-Live-Section"; // marks a refresh's request, to find its answer
  var timers = {};
  function busy(section) {
    var active = document.activeElement;
    if (active && section.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName)) {
      return true;
    }
    // A reply or edit box the reader opened (a refresh would close it under them).
    if (section.querySelector("details[open] textarea, details[open] input:not([type=hidden])")) {
      return true;
    }
    // Anything the reader typed and has not sent yet (a draft comment, a rollback reason).
    var fields = section.querySelectorAll(
      "textarea, input:not([type]), input[type=text], input[type=number]");
    if (Array.prototype.some.call(fields, function (field) {
      return field.value !== field.defaultValue;
    })) {
      return true;
    }
    // A form the server sent back with an error (data-unsent) holds what the reader wrote as
    // its default text: still not sent, so a refresh must not replace it with an empty form.
    var kept = section.querySelectorAll("form[data-unsent] textarea, form[data-unsent] input");
    return Array.prototype.some.call(kept, function (field) {
      return field.type !== "hidden" && field.value !== "";
    });
  }
  function refresh(id) {
    var section = document.getElementById(id);
    if (!section) return;
    if (busy(section) || document.visibilityState !== "visible") {
      timers[id] = setTimeout(function () { refresh(id); }, 2000);
      return;
    }
    var url = section.dataset.liveUrl || window.location.pathname + window.location.search;
    var headers = {};
    headers[HEADER] = id;
    htmx.ajax("GET", url, { target: "#" + id, select: "#" + id, swap: "outerHTML", headers: headers });
  }
  // The reader may have started writing while the refresh was on its way (a line number
  // clicked, a reply box opened): then its answer is not swapped in, and it is asked for again.
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var config = event.detail.requestConfig || {};
    var id = config.headers && config.headers[HEADER];
    if (!id) return;
    var section = document.getElementById(id);
    if (section && busy(section)) {
      event.detail.shouldSwap = false;
      clearTimeout(timers[id]);
      timers[id] = setTimeout(function () { refresh(id); }, 2000);
    }
  });
  function schedule(event) {
    document.querySelectorAll("[data-live-section]").forEach(function (section) {
      if (event.target && event.target.contains && !event.target.contains(section)) return;
      clearTimeout(timers[section.id]);
      timers[section.id] = setTimeout(function () { refresh(section.id); }, 300);
    });
  }
  document.body.addEventListener("htmx:wsAfterMessage", schedule);
  document.body.addEventListener("htmx:wsOpen", schedule);
})();
